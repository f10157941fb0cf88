"""Repair and return on the demo cluster and its simulator: a quarantine opens the node's repair (a second one joins
it); the evidence is captured before any reboot (the reboot path waits for it); parts are recorded by serial and
their history follows them across nodes; the validation the fault chose starts real benchmark runs, and when they end
a pass clears the events and resumes the node through the scheduler, a failure sends it back to repair, a gate that
cannot start changes nothing. A node in repair is not undrained by hand."""

import datetime as dt

import pytest
from django.db import IntegrityError, transaction
from rest_framework import serializers

from apps.benchmarks import services as benchmarks
from apps.benchmarks.choices import BurnLoad, RunStatus, Suite
from apps.core.audit import audit_context
from apps.core.choices import ChangeSource
from apps.core.models import AuditEntry
from apps.deployments.node_operations import start_scheduler_action
from apps.diagnosis.choices import Cause, IncidentState, RemediationState
from apps.diagnosis.models import Incident, Remediation
from apps.health import services as health
from apps.health.choices import ClearedBy, Severity, Source
from apps.inventory.models import Cable, Gpu, Node
from apps.inventory.services import NodeChangeRefused, drain_nodes, undrain_nodes
from apps.jobs.choices import JobStatus
from apps.jobs.models import Job
from apps.remediation import repairs, services
from apps.remediation.choices import Action, GateKind, GateState, Mode, Outcome, PartType, RepairState
from apps.remediation.history import node_history
from apps.remediation.models import RemediationPolicy, Repair, RepairGate
from apps.simulator import services as simulator
from apps.simulator.services import run_command

pytestmark = pytest.mark.django_db(transaction=True)

NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)


@pytest.fixture
def slurm(settings, demo_cluster, on_the_simulator):
    settings.RACKPILOT_SCHEDULER_KIND = "slurm"


def xid79(hostname: str, gpu: int = 2, at=NOW, incident=None):
    link = {"incident": str(incident.public_id)} if incident else {}
    return health.record_event(
        component=Gpu.objects.get(node__hostname=hostname, index=gpu),
        source=Source.TELEMETRY,
        kind="xid79",
        severity=Severity.CRITICAL,
        summary=f"GPU {gpu}: XID 79, GPU has fallen off the bus",
        evidence={"lines": [f"NVRM: Xid (PCI:0000:1b:00): 79, GPU has fallen off the bus (GPU {gpu})"], **link},
        at=at,
    )


def quarantined(hostname: str, event) -> Repair:
    """The node drained as a quarantine would, with its repair open on the event."""
    node = Node.objects.get(hostname=hostname)
    drain_nodes(nodes=[node], reason=f"rackpilot {event.kind}", since=NOW)
    return repairs.open_repair(node=node, reason=event.summary, events=[event], at=NOW)


def slurm_says(hostname: str) -> str:
    controller = services.scheduler_request(Node.objects.get(hostname=hostname))["controller"]
    return run_command(node=controller, argv=["scontrol", "show", "node", "-o", hostname]).stdout


def captured(repair: Repair, run_shards) -> Repair:
    run_shards(repairs.capture_evidence(repair=repair, transport="sim", queue=False))
    repair.refresh_from_db()
    return repair


def run_gate(gate: RepairGate) -> RepairGate:
    """Runs the gate's benchmark runs here, as a worker would; their end settles the gate."""
    for run in gate.runs.order_by("created", "pk"):
        run.refresh_from_db()
        if run.status == RunStatus.QUEUED:
            benchmarks.execute_run(run=run)
    gate.refresh_from_db()
    return gate


# --- the gate chosen by the fault -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kinds", "gate"),
    [
        (["link_degraded"], GateKind.LINK),
        (["link_errors", "nccl_slow"], GateKind.LINK),
        (["xid79"], GateKind.GPU),
        (["ecc_uncorrectable", "xid48"], GateKind.GPU),
        (["burn_in_failed"], GateKind.GPU),
        (["disk_full"], GateKind.ACCEPTANCE),
        (["xid79", "link_degraded"], GateKind.ACCEPTANCE),
        ([], GateKind.ACCEPTANCE),
    ],
)
def test_the_gate_is_chosen_by_the_fault(kinds, gate):
    chosen = repairs.gate_for(kinds)
    assert chosen.kind == gate
    for kind in kinds:
        assert kind in chosen.reason  # the why names what it matched


def test_the_gate_suites_are_the_real_ones():
    assert repairs.GATE_SUITES[GateKind.LINK] == (Suite.PAIRWISE,)
    assert repairs.GATE_SUITES[GateKind.GPU] == (Suite.BURN_IN, Suite.NVBANDWIDTH)
    assert set(repairs.GATE_SUITES[GateKind.ACCEPTANCE]) == {Suite.BURN_IN, Suite.NVBANDWIDTH, Suite.PAIRWISE}


# --- opening --------------------------------------------------------------------------------------------------------


def test_an_on_quarantine_opens_the_nodes_repair_with_its_event_and_decision(slurm):
    RemediationPolicy.objects.all().delete()
    RemediationPolicy.objects.create(
        name="xid79", kind_pattern="xid79", min_severity=Severity.CRITICAL, action=Action.QUARANTINE, mode=Mode.ON
    )
    event = xid79("gpu006")
    (decision,) = services.evaluate(now=NOW, transport="sim", queue=False)
    assert decision.outcome == Outcome.ACTED
    repair = Repair.objects.get(node__hostname="gpu006")
    assert repair.state == RepairState.OPEN and repair.opened_at == NOW
    assert list(repair.events.all()) == [event] and list(repair.decisions.all()) == [decision]
    assert repair.gate_kind == GateKind.GPU and "xid79 (xid*)" in repair.gate_reason
    assert AuditEntry.objects.for_object(repair).filter(action="create").exists()


def test_a_shadow_quarantine_opens_no_repair(slurm):
    RemediationPolicy.objects.all().delete()
    RemediationPolicy.objects.create(name="x", kind_pattern="xid79", action=Action.QUARANTINE, mode=Mode.SHADOW)
    xid79("gpu006")
    services.evaluate(now=NOW, transport="sim", queue=False)
    assert not Repair.objects.exists()


def test_a_second_quarantine_of_the_node_joins_its_repair_and_the_database_holds_one(demo_cluster):
    first = quarantined("gpu006", xid79("gpu006"))
    link = health.record_event(
        component=Node.objects.get(hostname="gpu006"), source=Source.SWEEP, kind="nccl_slow",
        severity=Severity.MAJOR, summary="gpu006 slow across nodes",
    )  # fmt: skip
    second = repairs.open_repair(node=first.node, reason="slow", events=[link])
    assert second.pk == first.pk and second.events.count() == 2
    assert second.gate_kind == GateKind.ACCEPTANCE  # a GPU and a link fault: the whole acceptance
    with pytest.raises(IntegrityError), transaction.atomic():
        Repair.objects.create(node=first.node, reason="another", opened_at=NOW)
    first.state, first.closed_at = RepairState.CLOSED, NOW
    first.save()
    assert repairs.open_repair(node=first.node, reason="back", events=[link]).pk != first.pk  # a new one once over


# --- evidence before any reboot ---------------------------------------------------------------------------------------


def test_the_evidence_packet_is_captured_from_the_node_and_the_reboot_path_waits_for_it(slurm, run_shards):
    simulator.inject_fault(node=Node.objects.get(hostname="gpu006"), kind="xid79", target="2", parameters={})
    repair = quarantined("gpu006", xid79("gpu006"))
    assert not repairs.evidence_ready(repair.node)
    # A reboot policy's decision on the node waits for the evidence: refused, saying why, nothing started.
    RemediationPolicy.objects.all().delete()
    RemediationPolicy.objects.create(name="reboot", kind_pattern="xid79", action=Action.REBOOT, mode=Mode.ON)
    (decision,) = services.evaluate(now=NOW, transport="sim", queue=False)
    assert decision.outcome == Outcome.REFUSED and "evidence is not captured" in decision.reason
    assert not Job.objects.filter(kind="scheduler-action").exists()

    repair = captured(repair, run_shards)
    assert repair.state == RepairState.EVIDENCE_CAPTURED and repair.evidence_captured_at is not None
    packet = repair.evidence
    assert packet["bug_report"]["present"] and packet["bug_report"]["file"].endswith(".log.gz")
    assert "nvidia-bug-report.sh" in packet["bug_report"]["output"]
    assert packet["kernel_log"]["read"] and any(
        "Xid" in line and ": 79," in line for line in packet["kernel_log"]["lines"]
    )
    assert not any("Link up" in line for line in packet["kernel_log"]["lines"])  # only the fault lines are kept
    assert packet["findings"][0]["kind"] == "xid79" and packet["findings"][0]["lines"]
    assert packet["bmc_log"] == []
    assert repairs.evidence_ready(repair.node)
    assert AuditEntry.objects.for_object(repair).filter(changes__has_key="evidence_captured_at").exists()


def test_a_node_without_the_bug_report_tool_says_so_and_the_packet_still_holds(
    demo_cluster, on_the_simulator, run_shards
):
    node = Node.objects.get(hostname="mgmt01")  # no GPUs: no NVIDIA driver, no nvidia-bug-report.sh
    health.record_event(
        component=health.Component.bmc(node), source=Source.BMC_LOG, kind="psu_failure", severity=Severity.MAJOR,
        summary="PSU 2 failure detected",
    )  # fmt: skip
    repair = repairs.open_repair(node=node, reason="PSU", at=NOW)
    repair = captured(repair, run_shards)
    assert repair.state == RepairState.EVIDENCE_CAPTURED
    assert repair.evidence["bug_report"] == {
        "present": False,
        "note": "nvidia-bug-report.sh is not installed on the node.",
    }
    assert repair.evidence["bmc_log"][0]["kind"] == "psu_failure"
    job = Job.objects.get(public_id=repair.evidence_job_id)
    assert job.status == JobStatus.SUCCEEDED


def test_a_capture_on_a_node_that_does_not_answer_says_so_on_the_repair(demo_cluster, on_the_simulator, run_shards):
    node = Node.objects.get(hostname="gpu006")
    repair = quarantined("gpu006", xid79("gpu006"))
    simulator.inject_fault(node=node, kind="node_hang", target="", parameters={})

    repair = captured(repair, run_shards)

    assert repair.state == RepairState.OPEN and repair.evidence_captured_at is None
    assert f"Evidence capture failed (job {repair.evidence_job_id})" in repair.notes
    assert "Capture it again once it answers." in repair.notes


def test_evidence_is_not_captured_twice_at_once_nor_for_a_repair_that_is_over(demo_cluster, on_the_simulator):
    repair = quarantined("gpu006", xid79("gpu006"))
    repairs.capture_evidence(repair=repair, transport="sim", queue=False)
    with pytest.raises(serializers.ValidationError) as refused:
        repairs.capture_evidence(repair=repair, transport="sim", queue=False)
    assert "repair" in refused.value.detail
    assert Job.objects.filter(kind="repair-evidence").count() == 1


# --- parts by serial -------------------------------------------------------------------------------------------------


def test_a_gpu_replaced_updates_the_inventory_serial_and_its_history_follows_it_across_nodes(
    demo_cluster, operator, run_shards, on_the_simulator
):
    gpu = Gpu.objects.get(node__hostname="gpu006", index=2)
    gpu.serial = "1650923000111"
    gpu.save()
    repair = captured(quarantined("gpu006", xid79("gpu006")), run_shards)
    with audit_context(source=ChangeSource.UI, user=operator):
        part = repairs.record_part(
            repair=repair, component_type=PartType.GPU, gpu=gpu, new_serial="1650923000999", user=operator
        )
    gpu.refresh_from_db()
    assert (part.old_serial, part.new_serial, gpu.serial) == ("1650923000111", "1650923000999", "1650923000999")
    repair.refresh_from_db()
    assert repair.state == RepairState.IN_REPAIR
    entry = AuditEntry.objects.for_object(gpu).latest("created")
    assert entry.changes["serial"] == ["1650923000111", "1650923000999"] and entry.actor == operator
    # The faulty GPU, repaired by the vendor, goes into gpu007 later.
    other = captured(quarantined("gpu007", xid79("gpu007", gpu=5)), run_shards)
    repairs.record_part(
        repair=other, component_type=PartType.GPU, gpu=Gpu.objects.get(node__hostname="gpu007", index=5),
        old_serial="1650923000555", new_serial="1650923000111", user=operator,
    )  # fmt: skip
    history = repairs.part_history("1650923000111")
    assert [(p.node.hostname, p.repair_id) for p in history] == [("gpu006", repair.pk), ("gpu007", other.pk)]


def test_a_part_refused_names_the_field_and_changes_nothing(demo_cluster, run_shards, on_the_simulator):
    repair = quarantined("gpu006", xid79("gpu006"))
    with pytest.raises(serializers.ValidationError) as early:
        repairs.record_part(repair=repair, component_type=PartType.OTHER, label="PSU 2", new_serial="X1")
    assert "repair" in early.value.detail  # before the evidence
    repair = captured(repair, run_shards)
    foreign = Gpu.objects.get(node__hostname="gpu001", index=0)
    for kwargs, field in [
        ({"component_type": PartType.GPU, "new_serial": "X1"}, "gpu"),
        ({"component_type": PartType.GPU, "gpu": foreign, "new_serial": "X1"}, "gpu"),
        ({"component_type": PartType.OTHER, "new_serial": "X1"}, "label"),
        ({"component_type": PartType.OTHER, "label": "PSU 2", "new_serial": "has space"}, "new_serial"),
        ({"component_type": "flux", "label": "x", "new_serial": "X1"}, "component_type"),
    ]:
        with pytest.raises(serializers.ValidationError) as refused:
            repairs.record_part(repair=repair, **kwargs)
        assert field in refused.value.detail
    assert not repair.parts.exists()
    assert foreign.serial == Gpu.objects.get(pk=foreign.pk).serial


# --- the validation and the return ---------------------------------------------------------------------------------


def test_a_passed_gpu_gate_clears_the_events_and_resumes_the_node_through_slurm(
    slurm, operator, run_shards, shipped_references
):
    node = Node.objects.get(hostname="gpu006")
    fault = simulator.inject_fault(node=node, kind="xid79", target="2", parameters={})
    event = xid79("gpu006")
    incident = Incident.objects.create(title="gpu006 GPU 2 off the bus", node=node, state=IncidentState.CONCLUDED)
    xid79("gpu006", at=NOW + dt.timedelta(minutes=1), incident=incident)  # a runbook's finding folds into the event
    run_shards(_drain_job(node, event))  # quarantined through Slurm, as an "on" policy does
    repair = captured(repairs.open_repair(node=node, reason=event.summary, events=[event], at=NOW), run_shards)
    assert "DRAIN" in slurm_says("gpu006")
    simulator.clear_fault(fault=fault)  # the GPU reseated

    gate = repairs.start_validation(repair=repair, user=operator, transport="sim")
    assert gate.kind == GateKind.GPU and [r.suite for r in gate.runs.order_by("created")] == ["burn-in", "nvbandwidth"]
    assert gate.runs.get(suite="burn-in").parameters["burn_load"] == BurnLoad.DCGM_R3
    repair.refresh_from_db()
    assert repair.state == RepairState.VALIDATING
    with pytest.raises(NodeChangeRefused):
        undrain_nodes(nodes=[node])  # not by hand while it validates

    gate = run_gate(gate)
    assert gate.state == GateState.PASSED, gate.summary
    event.refresh_from_db()
    assert not event.is_open and event.cleared_by == ClearedBy.VALIDATION
    repair.refresh_from_db()  # returning: the scheduler has not said yet that it took the node back
    assert repair.state == RepairState.RETURNING and repair.closed_at is None and repair.resume_job_id
    node.refresh_from_db()
    assert not node.is_drained
    job = run_shards(Job.objects.get(public_id=repair.resume_job_id))
    assert (job.kind, job.parameters["action"], job.status) == ("scheduler-action", "undrain", JobStatus.SUCCEEDED)
    assert "DRAIN" not in slurm_says("gpu006")
    repair.refresh_from_db()  # the job's end returned it
    assert repair.state == RepairState.RETURNED and repair.closed_at and "the scheduler resumed gpu006" in repair.notes
    incident.refresh_from_db()  # the incident whose fault the repair fixed is resolved by its validation
    assert incident.state == IncidentState.RESOLVED and "Repair of gpu006 validated (GPU gate)" in incident.resolution
    history = [entry.what for entry in node_history(node)]
    for step in ("event", "drain", "repair", "evidence", "gate", "cleared", "undrain", "resume"):
        assert step in history


def test_a_passed_gate_clears_what_it_checked_on_the_node_and_leaves_the_rest(demo_cluster):
    node = Node.objects.get(hostname="gpu006")
    repair = quarantined("gpu006", xid79("gpu006"))
    cable = Cable.objects.filter(a_nic__node=node).order_by("pk").first()

    def event(component, kind, source=Source.BMC_LOG):
        health.record_event(
            component=component, source=source, kind=kind, severity=Severity.MAJOR, summary=kind, at=NOW
        )

    event(node, "bmc_pcie_fatal")  # the BMC's record of the bus error under the lost GPU
    event(node, "bmc_watchdog")  # the OS it hung
    event(node, "burn_in_failed", Source.BENCHMARK)  # the gate that failed before this one
    event(node, "bmc_memory_ecc")  # a DIMM: no GPU check says anything of it
    event(node, "node_unreachable", Source.KERNEL_LOG)  # the gate's runs reached it: it answers again
    event(cable, "link_degraded", Source.TELEMETRY)

    assert repairs.validated_kinds(repair, GateKind.GPU) == [
        "bmc_pcie_fatal", "bmc_watchdog", "burn_in_failed", "node_unreachable", "xid79",
    ]  # fmt: skip
    assert repairs.validated_kinds(repair, GateKind.LINK) == ["link_degraded", "node_unreachable", "xid79"]
    assert "link_degraded" in repairs.validated_kinds(repair, GateKind.ACCEPTANCE)
    assert "bmc_memory_ecc" not in repairs.validated_kinds(repair, GateKind.ACCEPTANCE)


def _drain_job(node, event):
    drain_nodes(nodes=[node], reason=services.slurm_reason(event), since=NOW)
    return start_scheduler_action(node=node, requested_by=None)


def test_a_failed_gate_sends_the_node_back_to_repair_still_drained(slurm, run_shards, shipped_references):
    node = Node.objects.get(hostname="gpu006")
    simulator.inject_fault(node=node, kind="xid79", target="2", parameters={})  # never fixed
    event = xid79("gpu006")
    repair = captured(quarantined("gpu006", event), run_shards)
    gate = run_gate(repairs.start_validation(repair=repair, transport="sim"))
    assert gate.state == GateState.FAILED and "burn-in" in gate.summary.lower()
    repair.refresh_from_db()
    assert repair.state == RepairState.IN_REPAIR and repair.resume_job_id is None
    assert "Validation failed" in repair.notes
    node.refresh_from_db()
    event.refresh_from_db()
    assert node.is_drained and event.is_open
    assert not Job.objects.filter(kind="scheduler-action").exists()
    with pytest.raises(serializers.ValidationError) as refused:
        repairs.return_to_service(repair=repair)
    assert "gate" in refused.value.detail


def test_a_link_gate_without_a_known_good_partner_cannot_start_and_changes_nothing(
    demo_cluster, on_the_simulator, run_shards
):
    node = Node.objects.get(hostname="gpu006")
    cable_event = health.record_event(
        component=node, source=Source.SWEEP, kind="link_degraded", severity=Severity.MAJOR, summary="slow link",
    )  # fmt: skip
    repair = captured(quarantined("gpu006", cable_event), run_shards)
    mates = [n for n in Node.objects.filter(role="compute").exclude(pk=node.pk) if services.shared_leaf([node, n])]
    drain_nodes(nodes=mates, reason="rack maintenance")  # no healthy node in service on its leaf
    before = (repair.state, Repair.objects.get(pk=repair.pk).updated)
    with pytest.raises(serializers.ValidationError) as refused:
        repairs.start_validation(repair=repair, transport="sim")
    assert "No known-good partner for gpu006" in str(refused.value.detail["gate"])
    repair.refresh_from_db()
    assert (repair.state, repair.updated) == before
    assert not RepairGate.objects.exists()


def test_a_link_gate_runs_pairwise_against_a_healthy_leaf_mate(demo_cluster, on_the_simulator, run_shards):
    node = Node.objects.get(hostname="gpu006")
    event = health.record_event(
        component=node, source=Source.SWEEP, kind="link_errors", severity=Severity.MAJOR, summary="CRC errors",
    )  # fmt: skip
    xid79("gpu001")  # gpu001 is not healthy: not a partner
    repair = captured(quarantined("gpu006", event), run_shards)
    gate = repairs.start_validation(repair=repair, transport="sim")
    (run,) = gate.runs.all()
    partner = gate.parameters["partner"]
    assert run.suite == Suite.PAIRWISE and partner not in ("gpu001", "gpu006")
    assert services.shared_leaf([node, Node.objects.get(hostname=partner)])
    assert sorted(run.nodes.values_list("hostname", flat=True)) == sorted(["gpu006", partner])


# --- the return waits for the scheduler ------------------------------------------------------------------------------


def validated(hostname: str, run_shards) -> Repair:
    """gpu006 quarantined through Slurm, its evidence in and its GPU gate passed (as run_finished leaves it when the
    resume could not start), ready to return."""
    node = Node.objects.get(hostname=hostname)
    event = xid79(hostname)
    run_shards(_drain_job(node, event))
    repair = captured(repairs.open_repair(node=node, reason=event.summary, events=[event], at=NOW), run_shards)
    RepairGate.objects.create(repair=repair, kind=GateKind.GPU, state=GateState.PASSED, started_at=NOW, finished_at=NOW)
    repair.state = RepairState.VALIDATING
    repair.save()
    return repair


def test_a_resume_the_scheduler_does_not_carry_out_leaves_the_repair_active_and_the_node_drained(
    slurm, run_shards, api_as, operator
):
    repair = validated("gpu006", run_shards)
    drained = Node.objects.get(hostname="gpu006")
    reason = drained.drain_reason
    controller = services.scheduler_request(drained)["controller"]
    repair = repairs.return_to_service(repair=repair)
    assert repair.state == RepairState.RETURNING and repair.closed_at is None
    with pytest.raises(serializers.ValidationError) as twice:  # one resume at a time
        repairs.return_to_service(repair=repair)
    assert "resuming the node already" in str(twice.value.detail["repair"])
    with pytest.raises(serializers.ValidationError):  # nor closed under the scheduler's feet
        repairs.close_repair(repair=repair, user=operator, note="give up")
    fault = simulator.inject_fault(node=controller, kind="node_hang")
    job = run_shards(Job.objects.get(public_id=repair.resume_job_id))
    assert job.status != JobStatus.SUCCEEDED

    repair.refresh_from_db()
    assert repair.state == RepairState.VALIDATING and repair.closed_at is None and repair.resume_job_id is None
    assert repairs.passed_gate(repair) is not None  # the gate still stands: no second validation needed
    assert f"The scheduler did not resume gpu006 (job {job.public_id}" in repair.notes
    assert "timed out" in repair.notes.lower()  # the scheduler's error, as the job's cell said it
    node = Node.objects.get(hostname="gpu006")
    assert node.is_drained and node.drain_reason == reason  # the inventory follows the scheduler, which holds it
    simulator.clear_fault(fault=fault)  # the controller answers again: Slurm still holds the node drained
    assert "DRAIN" in slurm_says("gpu006")
    assert not any(step == "resume" for step in (entry.what for entry in node_history(node)))

    # The operator returns it again, over the API, once the controller answers.
    answer = api_as(operator).post(f"/api/repairs/{repair.public_id}/return/", format="json")
    assert answer.status_code == 200 and answer.json()["state"] == "returning"
    repair.refresh_from_db()
    run_shards(Job.objects.get(public_id=repair.resume_job_id))
    repair.refresh_from_db()
    assert repair.state == RepairState.RETURNED and repair.closed_by == operator
    assert not Node.objects.get(hostname="gpu006").is_drained and "DRAIN" not in slurm_says("gpu006")


def test_a_return_whose_job_end_was_not_heard_is_settled_by_the_periodic_pass(slurm, run_shards):
    repair = repairs.return_to_service(repair=validated("gpu006", run_shards))
    Job.objects.filter(public_id=repair.resume_job_id).update(status=JobStatus.ERROR, summary="worker lost")
    (settled,) = repairs.settle_returns()
    assert settled.pk == repair.pk and settled.state == RepairState.VALIDATING and "worker lost" in settled.notes
    assert Node.objects.get(hostname="gpu006").is_drained
    assert repairs.settle_returns() == []  # settled once


def test_an_incident_about_the_node_still_waiting_for_its_fix_is_rechecked_once_it_returns(slurm, run_shards, settings):
    settings.RACKPILOT_DIAGNOSIS_VERIFY_WAIT_SECONDS = 0
    node = Node.objects.get(hostname="gpu006")
    # Runbook 1 concluded on a lost GPU of gpu006 (its finding's event is not one of the repair's): a fix by hand.
    incident = Incident.objects.create(
        title="gpu006: GPU 2 lost", node=node, state=IncidentState.CONCLUDED, cause=Cause.GPU_LOST, transport="sim"
    )
    incident.suspect_nodes.add(node)
    fix = Remediation.objects.create(incident=incident, cause=Cause.GPU_LOST, summary="Drain gpu006, reset the GPU")
    elsewhere = Incident.objects.create(
        title="link", node=node, state=IncidentState.CONCLUDED, cause=Cause.LINK_DOWN, transport="sim"
    )
    Remediation.objects.create(incident=elsewhere, cause=Cause.LINK_DOWN, summary="Reseat the cable")

    repair = repairs.return_to_service(repair=validated("gpu006", run_shards))
    incident.refresh_from_db()
    assert incident.state == IncidentState.CONCLUDED  # not while the scheduler has not taken the node back
    run_shards(Job.objects.get(public_id=repair.resume_job_id))

    fix.refresh_from_db()
    incident.refresh_from_db()
    assert fix.state == RemediationState.APPLIED and fix.verify_job is not None
    assert incident.state == IncidentState.VERIFYING  # its own re-check, not a forced resolution
    assert AuditEntry.objects.for_object(fix).filter(action="approve", changes__policy=[None, "automatic"]).exists()
    run_shards(fix.verify_job)
    incident.refresh_from_db()
    assert incident.state == IncidentState.RESOLVED and "Re-checked: no fault left" in incident.resolution
    elsewhere.refresh_from_db()  # a GPU repair does not fix a cable
    assert elsewhere.state == IncidentState.CONCLUDED and elsewhere.remediations.get().state == "proposed"
