import pytest

from apps.workloads.demo import load_workloads
from apps.workloads.models import InferenceService, TrainingJob

pytestmark = pytest.mark.django_db


def test_the_demo_adds_a_service_and_a_job_once(demo_cluster):
    assert load_workloads() == {"inference services": 1, "training jobs": 1}
    assert load_workloads() == {"inference services": 0, "training jobs": 0}
    job = TrainingJob.objects.get()
    assert job.world_size == 128 and job.rank_map()[8][1].hostname == "gpu006"
    assert InferenceService.objects.get().design_tokens_per_second == 10000


def test_pages_need_a_login(client, demo_cluster):
    assert client.get("/workloads/").status_code == 302


def test_list_and_detail_pages_show_nodes_ranks_and_targets(browser_as, viewer, demo_cluster):
    load_workloads()
    client = browser_as(viewer)
    page = client.get("/workloads/").content.decode()
    assert "chat-llama-70b" in page and "llama-pretrain" in page and "10000" in page
    job = TrainingJob.objects.get()
    detail = client.get(f"/workloads/training/{job.public_id}/").content.decode()
    assert "128 ranks" in detail and "8–15" in detail  # gpu006 holds node rank 1: global ranks 8 to 15
    service = InferenceService.objects.get()
    detail = client.get(f"/workloads/services/{service.public_id}/").content.decode()
    assert "p99 ≤ 100 ms" in detail and "http://chat-llama-70b.demo.rackpilot:8000/v1" in detail
