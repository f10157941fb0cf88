"""A deployment over SSH to a real sshd on 127.0.0.1, check-only: the read commands run on the host, nothing is
applied, and the tools this host lacks (nvidia-smi, mlnx_qos ...) give could-not-run verdicts, never a pass."""

import pytest

from apps.deployments import services
from apps.deployments.choices import Outcome
from apps.deployments.models import Verdict
from apps.jobs import services as job_services
from apps.jobs.choices import StepStatus
from apps.jobs.models import Artifact
from tests.nodeexec.conftest import sshd  # noqa: F401  (the fixture)
from tests.nodeexec.test_ssh import make_ssh_node, ssh_settings  # noqa: F401

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

APPLY_WORDS = ("ip link set", "ethtool -L", "mlnx_qos -i lo --trust", "fwupdmgr", "apt-get", "pip install", "sh -c")


def test_check_only_run_over_ssh_reads_and_applies_nothing(sshd, ssh_settings, operator, run_shards, monkeypatch):  # noqa: F811
    monkeypatch.setattr(job_services, "enqueue", lambda job: None)
    node = make_ssh_node(sshd, "ssh-node-1")
    deployment = services.create_deployment(
        name="ssh-audit", targets=job_services.TargetSpec(nodes=(node.hostname,)), user=operator, transport="ssh"
    )
    services.approve(deployment=deployment, user=operator, steps=["firmware", "mtu", "driver"])
    run = services.start(deployment=deployment, user=operator, check_only=True)
    run_shards(run.job)

    cells = {cell.step: cell for cell in run.job.steps.all()}
    transcripts = "\n".join(artifact.text() for artifact in Artifact.objects.filter(step__job=run.job))
    assert "$ nvidia-smi --query-gpu=" in transcripts and "$ cat /sys/class/dmi/id/bios_version" in transcripts
    assert not [word for word in APPLY_WORDS if f"$ {word}" in transcripts]
    assert cells["gpus"].status == StepStatus.ERROR and "nvidia-smi" in cells["gpus"].summary
    assert cells["mtu"].status == StepStatus.SKIPPED and cells["mtu"].summary == "not applicable to this node"
    assert cells["checkpoints"].summary.startswith("not run: phase 1")  # phase 1 failed: later phases wait
    outcomes = set(Verdict.objects.filter(deployment=deployment, step="gpus").values_list("outcome", flat=True))
    assert outcomes == {Outcome.COULD_NOT_RUN}
