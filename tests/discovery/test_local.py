"""`local` discovery on this machine, which has no GPU and no NVIDIA tools: the GPU facts could not run, never pass."""

import shutil
from pathlib import Path

import pytest

from apps.discovery.models import Difference, NodeFacts
from apps.inventory.catalogue import sync_gpu_skus
from apps.inventory.models import GpuSku
from apps.jobs import services
from apps.jobs.choices import JobStatus, StepStatus
from apps.jobs.models import JobEvent, JobStep
from tests import factories

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this host has nvidia-smi")
def test_local_discovery_without_gpus_gives_could_not_run_cells_with_the_reason(run_shards, fast_jobs):
    sync_gpu_skus(GpuSku)
    node = factories.make_node(hostname="localhost-probe", expected_gpu_count=8, gpu_sku=factories.h200())
    factories.make_gpu(node=node, index=0)
    job = services.create_job(
        kind="discover",
        targets=services.TargetSpec(nodes=(node.hostname,)),
        parameters={"interfaces": []},
        transport="local",
    )
    job = run_shards(job)

    assert job.status == JobStatus.FAILED  # a discovery that could not read the GPUs is not a success
    for step in ("gpus", "topology"):
        cell = JobStep.objects.get(job=job, step=step)
        assert cell.status == StepStatus.ERROR
        assert cell.summary == "could not run: nvidia-smi is not installed (not found on the node)"
    snapshot = NodeFacts.objects.get(job=job, node=node)
    assert snapshot.could_not_run["gpus"] == "nvidia-smi is not installed (not found on the node)"
    assert "gpus" not in snapshot.facts
    assert JobEvent.objects.filter(job=job, step="gpus", message__contains="could not run").exists()
    # No reading is not a reading of zero GPUs: the inventory's GPU is not reported missing.
    assert not Difference.objects.filter(job=job, object_type="gpu").exists()
    # What this host could answer was read; a minimal image without iproute2 has no `ip`, which is said in words.
    links = JobStep.objects.get(job=job, step="links")
    if shutil.which("ip"):
        assert links.status == StepStatus.SUCCEEDED
        assert "links" in snapshot.facts
    else:
        assert links.status == StepStatus.ERROR
        assert links.summary == "could not run: ip is not installed (not found on the node)"


def this_hosts_interface() -> str:
    """An interface of this host that is not the loopback (a container or VM always has one)."""
    return sorted(path.name for path in Path("/sys/class/net").iterdir() if path.name != "lo")[0]


@pytest.mark.skipif(shutil.which("mlnx_qos") is not None, reason="this host has mlnx_qos")
def test_local_discovery_reads_this_hosts_nics_in_one_cell(run_shards, fast_jobs):
    interface = this_hosts_interface()
    node = factories.make_node(hostname="localhost-nics")
    job = services.create_job(
        kind="discover",
        targets=services.TargetSpec(nodes=(node.hostname,)),
        parameters={"interfaces": [interface, "nosuch0"]},
        transport="local",
    )
    job = run_shards(job)

    cell = JobStep.objects.get(job=job, step="nics")
    assert cell.status == StepStatus.ERROR  # mlnx_qos is missing here: never green
    # Each missing tool is named, in the script's order; CI installs ethtool, a fresh machine may not have it.
    missing = [tool for tool in ("ethtool", "ethtool -i") if not shutil.which("ethtool")] + ["mlnx_qos"]
    expected = "; ".join(f"{tool} is not installed (not found on the node) on {interface}" for tool in missing)
    assert cell.summary.startswith(f"could not run: {expected}")
    assert cell.summary.endswith("not on this node: nosuch0")
    snapshot = NodeFacts.objects.get(job=job, node=node)
    assert snapshot.could_not_run[f"qos:{interface}"] == "mlnx_qos is not installed (not found on the node)"
    assert "qos:nosuch0" not in snapshot.could_not_run
    if shutil.which("ethtool"):  # CI installs it; what the real tool said is kept
        assert snapshot.facts["interfaces"]["nic-fw"][interface]["driver"]
        assert "1 NIC; " in cell.summary
    else:
        assert snapshot.could_not_run[f"speed:{interface}"] == "ethtool is not installed (not found on the node)"
