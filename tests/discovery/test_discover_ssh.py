"""Discovery over SSH to a real sshd on 127.0.0.1: the fact commands, the NIC facts script among them, reach the
remote shell quoted intact, and what this host cannot answer (no GPU, no mlnx_qos) is could-not-run, never a pass."""

import shutil

import pytest

from apps.discovery.models import NodeFacts
from apps.jobs import services as job_services
from apps.jobs.choices import StepStatus
from apps.jobs.models import JobStep
from tests.discovery.test_local import this_hosts_interface
from tests.nodeexec.conftest import sshd  # noqa: F401  (the fixture)
from tests.nodeexec.test_ssh import make_ssh_node, ssh_settings  # noqa: F401

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this host has nvidia-smi")
def test_discovery_over_ssh_reads_this_host_and_names_what_it_could_not(sshd, ssh_settings, run_shards):  # noqa: F811
    node = make_ssh_node(sshd, "ssh-discover-1")
    interface = this_hosts_interface()
    job = job_services.create_job(
        kind="discover",
        targets=job_services.TargetSpec(nodes=(node.hostname,)),
        parameters={"interfaces": [interface, "nosuch0"]},
        transport="ssh",
    )
    job = run_shards(job)

    cells = {cell.step: cell for cell in JobStep.objects.filter(job=job)}
    assert cells["gpus"].status == StepStatus.ERROR
    assert cells["gpus"].summary == "could not run: nvidia-smi is not installed (not found on the node)"
    for step in ("links", "cpu", "disks"):
        assert cells[step].status == StepStatus.SUCCEEDED, cells[step].summary
    # The script arrived whole: it split the list, found the interface and reported the name that is not there.
    assert cells["nics"].summary.endswith("not on this node: nosuch0")
    snapshot = NodeFacts.objects.get(job=job, node=node)
    assert snapshot.could_not_run[f"qos:{interface}"] == "mlnx_qos is not installed (not found on the node)"
    assert snapshot.facts["links"]["interfaces"] and snapshot.facts["cpu"]["threads"] >= 1
