"""Profile a training job from the timelines page in a real browser: Profile lands on the job's progress page (a
`timeline-analysis` job run by the embedded server's worker), which goes on by itself to the stored analysis."""

import re

import pytest

from apps.accounts.choices import Role
from apps.benchmarks.models import TimelineAnalysis
from apps.inventory.demo import DEMO, load_cluster
from apps.inventory.models import Node
from apps.jobs.models import Job
from apps.workloads.models import TrainingJob
from apps.workloads.services import set_training_nodes
from tests import factories
from tests.browser.session import log_in

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def live_server_env():
    return {"RACKPILOT_JOB_DEFAULT_TRANSPORT": "sim"}


def test_profile_shows_progress_then_the_analysis(live_server_url, browser_page):
    load_cluster(DEMO)
    factories.make_user(role=Role.OPERATOR, username="op", password="correct-horse-battery")
    job = TrainingJob.objects.create(name="llm-pretrain", ranks_per_node=8)
    set_training_nodes(job=job, nodes=list(Node.objects.filter(hostname__in=["gpu001", "gpu002", "gpu003"])))

    page = browser_page
    page.set_default_timeout(60000)
    seen = []
    page.on("response", lambda response: seen.append((response.request.method, response.url, response.status)))
    log_in(page, live_server_url, "op")
    page.goto(f"{live_server_url}/benchmarks/timelines/")
    page.select_option("#timeline-from-job select[name=training_job]", "llm-pretrain")
    page.fill("#timeline-from-job input[name=steps]", "3")
    page.click("#timeline-from-job button[type=submit]")

    page.wait_for_url(re.compile(r"/benchmarks/timelines/[0-9a-f-]{36}/$"))
    page.wait_for_selector("#ranks")
    profile = Job.objects.get(kind="timeline-analysis")
    analysis = TimelineAnalysis.objects.get(job=profile)
    assert page.url.endswith(f"/benchmarks/timelines/{analysis.public_id}/")
    assert analysis.rank_count == 24 and analysis.step_count == 3 and profile.status == "succeeded"
    # The POST answered at once with the progress page; the analysis came from it (its live fragment's HX-Redirect,
    # or its own redirect when the job had already ended), never from the POST itself.
    progress_page = f"/benchmarks/timelines/jobs/{profile.public_id}/"
    posted = [status for method, url, status in seen if method == "POST" and url.endswith("/timelines/from-job/")]
    assert posted == [302]
    assert any(url.endswith(progress_page) for method, url, _ in seen if method == "GET")
