"""The triage keys added from real failures (aws-ofi-nccl RC 12, GSP timeouts, NV_ERR_RESET_REQUIRED, Slurm's
unkillable step, an IB port down, a GPU OOM) reach the runbooks: each becomes evidence of a topic the runbook weighs
or routes by, citing its lines and carrying its problem's advice, read from the real fixtures."""

import pytest

from apps.diagnosis import recovery, runbook
from apps.diagnosis.choices import ADVICE, Cause, EvidenceVerdict
from apps.diagnosis.runbook import NodeFacts
from tests.parsers.helpers import REAL

GSP = (
    REAL
    / "dmesg-xid"
    / ("journal-k-no-hostname-gsp-heartbeat-timed-out-kgsprpcrecvpoll-no-xid-bazzite-issue4449-partial.txt")
)
RESET = (
    REAL
    / "dmesg-xid"
    / ("dmesg-T-gsprmalloc-failed-nv-err-reset-required-0x62-kernel-channel-no-xid-sichek-issue51-partial.txt")
)
UNKILLABLE = REAL / "slurm/sinfo-R-kill-task-failed-drain-reason-awsome-distributed-ai-issue185.txt"
PORT_DOWN = REAL / "infiniband/gpud-ibstat.47.0.h100.some.down.with.polling.1.txt"
OFI_RC12 = (
    REAL
    / "nccl-warn"
    / ("net-ofi-unable-to-register-memory-rc12-cannot-allocate-memory-pdsh-prefix-efa-nccl-issue563-partial.txt")
)
GPU_OOM = (
    "[W1009 21:05:01.314535354 CUDACachingAllocator.cpp:3934] memory allocation failed with OOM on device 3 "
    "while trying to allocate 67108864 bytes (free: 20316160, total: 23745396736).\n"
)

# problem, its text, runbook 3's topic, where runbook 3's routing sends it, runbook 1's check (None: not weighed)
CASES = [
    ("gpu_firmware_failure", GSP, "cuda", "training-interrupted", "cuda"),
    ("gpu_reset_required", RESET, "cuda", "training-interrupted", "cuda"),
    ("slurm_unkillable_step", UNKILLABLE, "worker", "training-interrupted", "blocked"),
    ("ib_port_down", PORT_DOWN, "fabric", "nccl-timeout", "link"),
    ("nccl_system_error", OFI_RC12, "worker", "training-interrupted", None),
    ("oom", GPU_OOM, "worker", "training-interrupted", None),
]


def _text(source) -> str:
    return source if isinstance(source, str) else source.read_text(errors="replace")


@pytest.mark.parametrize(("problem", "source", "topic", "routed", "check"), CASES, ids=[case[0] for case in CASES])
def test_runbook_3_weighs_each_key_and_shows_its_advice(problem, source, topic, routed, check):
    text = _text(source)
    seen = [o for o in recovery.judge_log("gpu001", text, "tail log") if o.data.get("problem") == problem]
    assert seen, f"runbook 3 ignores {problem}"
    assert {o.check for o in seen} == {topic} and all(o.verdict == EvidenceVerdict.FAULT for o in seen)
    assert seen[0].data["advice"] == ADVICE[problem].next_step
    assert seen[0].excerpt and seen[0].data["lines"]  # it cites its lines
    assert recovery.route({o.check for o in seen}) == routed


@pytest.mark.parametrize(("problem", "source", "topic", "routed", "check"), CASES, ids=[case[0] for case in CASES])
def test_runbook_1_weighs_each_key_it_has_a_cause_for(problem, source, topic, routed, check):
    seen = [o for o in runbook.judge_log("gpu001", _text(source), "tail log", {}) if o.data.get("problem") == problem]
    if check is None:
        assert not seen
        return
    assert {o.check for o in seen} == {check} and seen[0].data["advice"] == ADVICE[problem].next_step
    assert runbook.weights(seen[0])


def test_a_port_down_in_the_log_sends_runbook_1_to_the_link_cause():
    seen = [o for o in runbook.judge_log("gpu001", PORT_DOWN.read_text(), "ibstat", {}) if o.check == "link"]
    assert seen[0].subject and runbook.weights(seen[0]) == {Cause.LINK_DOWN: 10}
    # with a disk or GPU fault in the same log the job is runbook 3's, as for a watchdog timeout
    assert recovery.route({"fabric", "worker"}) == "nccl-timeout"
    assert recovery.route({"fabric", "cuda"}) == "training-interrupted"


@pytest.mark.parametrize("source", [GSP, RESET], ids=["gsp-timeout", "reset-required"])
def test_a_gpu_lost_without_an_xid_in_the_kernel_log_is_a_bad_node(source):
    text = source.read_text(errors="replace")
    kernel = recovery.judge_kernel("gpu003", True, text, "dmesg")
    assert kernel.verdict == EvidenceVerdict.FAULT and kernel.data["problems"] and kernel.excerpt
    assert recovery.weights(kernel) == {Cause.BAD_NODE: 10}  # the node is replaced, as for Xid 79
    node = NodeFacts(hostname="gpu003", node_id=None, nics=())
    links = (REAL / "network/ip-link-show-dgx-spark-cx7-mtu1500-two-invocations.txt").read_text()
    outputs = {"links": (True, links, "ip link"), "dmesg": (True, text, "dmesg")}
    [xid] = [o for o in runbook.judge_network(node, outputs) if o.check == "xid"]
    assert xid.verdict == EvidenceVerdict.FAULT and runbook.weights(xid) == {Cause.GPU_LOST: 10}


def test_a_kernel_log_without_a_lost_gpu_stays_healthy():
    # Xid 13 (a graphics engine exception, the application's) and Xid 43: no GPU leaves service
    text = REAL / "dmesg-xid/gpud-dmesg-decode-iso-xid13-sm-warp-exceptions-then-xid43-pt_main_thread-partial.txt"
    kernel = recovery.judge_kernel("gpu003", True, text.read_text(errors="replace"), "dmesg")
    assert kernel.verdict == EvidenceVerdict.HEALTHY and kernel.data["problems"] == []


@pytest.mark.django_db
def test_the_incident_page_shows_the_advice_beside_the_evidence(training_job, browser_as, viewer, operator):
    from django.urls import reverse

    from apps.diagnosis import recording, services
    from apps.jobs.models import Job

    incident = services.open_incident(user=operator, training_job=training_job, runbook="training-interrupted")
    job = Job.objects.create(kind="training-interrupted", parameters={}, transport="sim", shard_count=0)
    observations = recovery.judge_log("gpu003", GSP.read_text(errors="replace"), "tail log")
    recording.record_observations(incident=incident, job=job, observations=observations, artifacts={})

    live = browser_as(viewer).get(reverse("incident-live", args=[incident.public_id])).content.decode()
    row = live.split('data-topic="cuda"')[1].split("</tr>")[0]
    assert "gpu_firmware_failure" in row and 'class="muted small advice">Next: Drain the node' in row
