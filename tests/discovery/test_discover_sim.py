"""Discovery over the simulated demo cluster: matching nodes record nothing, injected faults become differences."""

import pytest

from apps.core.choices import AuditAction
from apps.core.models import AuditEntry
from apps.discovery import services
from apps.discovery.choices import DifferenceState
from apps.discovery.models import Difference, NodeFacts
from apps.inventory.choices import FirmwareComponent, GpuHealth
from apps.inventory.demo import BIOS_BASELINE, BIOS_BEHIND
from apps.inventory.models import Firmware, Gpu, Nic, Node
from apps.jobs.choices import JobStatus, StepStatus
from apps.jobs.models import JobEvent, JobStep
from apps.jobs.services import TargetSpec
from apps.simulator.services import inject_fault

pytestmark = pytest.mark.django_db(transaction=True)


def discover(run_shards, *hostnames):
    return run_shards(services.start_discovery(targets=TargetSpec(nodes=hostnames), transport="sim"))


def open_differences(job) -> set[tuple]:
    return set(
        Difference.objects.filter(job=job, state=DifferenceState.OPEN).values_list(
            "node__hostname", "object_type", "object_key", "field", "expected", "discovered"
        )
    )


def test_nodes_that_match_the_inventory_record_nothing(demo_cluster, simulator, run_shards, fast_jobs):
    job = discover(run_shards, "gpu016", "gpu018")
    assert job.status == JobStatus.SUCCEEDED, job.summary
    cells = JobStep.objects.filter(job=job)
    # 8 fact families; speed, firmware and PFC of the 8 data NICs are read in one nics cell.
    assert cells.count() == 2 * 8
    assert set(cells.values_list("status", flat=True)) == {StepStatus.SUCCEEDED}
    assert cells.get(hostname="gpu016", step="gpus").summary.startswith("8 GPUs: NVIDIA H200")
    assert not Difference.objects.filter(job=job).exists()  # nothing differs, nothing was missing
    snapshot = NodeFacts.objects.get(job=job, node__hostname="gpu016")
    assert snapshot.could_not_run == {}
    assert snapshot.facts["gpus"]["count"] == 8 and snapshot.facts["bios"]["version"] == BIOS_BASELINE
    assert snapshot.facts["reconciled"]["affinity"]["ens1np0"] == "GPU0,GPU1"


def test_injected_faults_are_recorded_and_the_inventory_is_not_overwritten(
    demo_cluster, simulator, run_shards, fast_jobs
):
    node = Node.objects.get(hostname="gpu016")
    inject_fault(node=node, kind="mtu", target="ens1np0")
    inject_fault(node=node, kind="xid79", target="3")
    inject_fault(node=node, kind="nic_down", target="ens2np0")
    audit_before = AuditEntry.objects.count()

    job = discover(run_shards, "gpu016", "gpu017")

    assert job.status == JobStatus.SUCCEEDED, job.summary
    assert open_differences(job) == {
        ("gpu016", "nic", "ens1np0", "mtu", "9000", "1500"),
        ("gpu016", "gpu", "GPU3", "present", "present", "missing"),
        ("gpu016", "nic", "ens2np0", "link_up", "up", "down"),
    }
    # Recorded, not applied: the inventory still says what it said.
    assert Nic.objects.get(node=node, name="ens1np0").mtu == 9000
    assert Nic.objects.get(node=node, name="ens2np0").link_up is True
    assert Gpu.objects.get(node=node, index=3).health == GpuHealth.HEALTHY
    assert AuditEntry.objects.exclude(job=job.public_id, action=AuditAction.START).count() == audit_before  # no change
    notes = NodeFacts.objects.get(job=job, node=node).notes
    assert "7 of 8 expected GPUs reported by nvidia-smi." in notes
    # The GPU renumbering after the lost GPU does not shift UUIDs onto the wrong inventory rows.
    assert not Difference.objects.filter(job=job, field__in=["uuid", "serial", "pci_bus_id"]).exists()
    assert JobEvent.objects.filter(job=job, hostname="gpu016", message__contains="3 differences to decide").exists()


def test_the_bios_that_lags_the_fleet_matches_the_inventory_and_is_noted(
    demo_cluster, simulator, run_shards, fast_jobs
):
    # The simulator reports the firmware the inventory holds: gpu017 is behind its fleet, not behind its record.
    job = discover(run_shards, "gpu017")
    assert Firmware.objects.get(node__hostname="gpu017", component=FirmwareComponent.BIOS).version == BIOS_BEHIND
    assert not Difference.objects.filter(job=job).exists()
    snapshot = NodeFacts.objects.get(job=job)
    assert snapshot.facts["bios"]["version"] == BIOS_BEHIND
    assert snapshot.facts["reconciled"]["bios_drift"] == {"node": BIOS_BEHIND, "fleet": BIOS_BASELINE}
    assert any("drifts from the fleet" in note for note in snapshot.notes)


def test_firmware_drift_against_the_inventory_is_a_difference(demo_cluster, simulator, run_shards, fast_jobs):
    # The inventory was updated to the new baseline but the node was not flashed: the node still reports 2.3.5.
    row = Firmware.objects.get(node__hostname="gpu017", component=FirmwareComponent.BIOS)
    job = discover_with_inventory(run_shards, row, "2.4.1")
    assert open_differences(job) == {("gpu017", "firmware", "bios", "version", "2.4.1", BIOS_BEHIND)}


def discover_with_inventory(run_shards, row, version):
    from apps.simulator import services as sim_services

    original = sim_services.build_state

    def reported(node, *fabric):  # the node as it really is, whatever the inventory now says
        state = original(node, *fabric)
        state.bios = BIOS_BEHIND
        return state

    sim_services.build_state = reported
    try:
        row.version = version
        row.save()
        return discover(run_shards, row.node.hostname)
    finally:
        sim_services.build_state = original


def test_a_first_discovery_fills_in_what_the_inventory_lacks(demo_cluster, simulator, run_shards, fast_jobs):
    node = Node.objects.get(hostname="gpu016")
    Gpu.objects.filter(node=node, index=0).update(uuid=None, serial="")
    Firmware.objects.filter(node=node, component=FirmwareComponent.NIC_FIRMWARE, target="ens1np0").delete()

    job = discover(run_shards, "gpu016")

    filled = {(d.object_key, d.field): d.discovered for d in Difference.objects.filter(job=job)}
    assert set(filled) == {("GPU0", "uuid"), ("GPU0", "serial"), ("ens1np0", "version")}
    assert set(Difference.objects.filter(job=job).values_list("state", flat=True)) == {DifferenceState.FILLED}
    gpu = Gpu.objects.get(node=node, index=0)
    assert gpu.uuid == filled["GPU0", "uuid"] and gpu.uuid.startswith("GPU-") and gpu.serial == filled["GPU0", "serial"]
    assert Firmware.objects.get(node=node, component=FirmwareComponent.NIC_FIRMWARE, target="ens1np0").version == (
        "28.41.1000"
    )
    entries = list(AuditEntry.objects.for_object(gpu).values_list("changes", "source", "job"))
    assert ({"uuid": [None, gpu.uuid]}, "job", job.public_id) in entries  # made by the job, and linked to it
    assert ({"serial": ["", gpu.serial]}, "job", job.public_id) in entries


def test_accept_updates_the_inventory_with_an_audit_entry_and_dismiss_changes_nothing(
    demo_cluster, simulator, run_shards, fast_jobs, operator
):
    node = Node.objects.get(hostname="gpu016")
    inject_fault(node=node, kind="mtu", target="ens1np0")
    inject_fault(node=node, kind="nic_down", target="ens2np0")
    inject_fault(node=node, kind="xid79", target="3")
    job = discover(run_shards, "gpu016")
    mtu = Difference.objects.get(job=job, object_key="ens1np0", field="mtu")
    link = Difference.objects.get(job=job, object_key="ens2np0", field="link_up")
    lost = Difference.objects.get(job=job, object_key="GPU3", field="present")

    services.accept_difference(difference=mtu, user=operator)
    nic = Nic.objects.get(node=node, name="ens1np0")
    assert nic.mtu == 1500
    entry = AuditEntry.objects.for_object(nic).first()
    assert entry.changes == {"mtu": [9000, 1500]} and entry.actor == operator
    mtu.refresh_from_db()
    assert mtu.state == DifferenceState.ACCEPTED and mtu.decided_by == operator and mtu.decided_at

    services.accept_difference(difference=lost, user=operator)
    assert Gpu.objects.get(node=node, index=3).health == GpuHealth.MISSING

    audit_count = AuditEntry.objects.count()
    services.dismiss_difference(difference=link, user=operator)
    link.refresh_from_db()
    assert link.state == DifferenceState.DISMISSED and link.decided_by == operator
    assert Nic.objects.get(node=node, name="ens2np0").link_up is True
    assert AuditEntry.objects.count() == audit_count

    with pytest.raises(services.DecisionError):
        services.accept_difference(difference=link, user=operator)


def test_a_new_discovery_supersedes_open_differences_and_sees_accepted_ones_as_settled(
    demo_cluster, simulator, run_shards, fast_jobs, operator
):
    node = Node.objects.get(hostname="gpu016")
    inject_fault(node=node, kind="mtu", target="ens1np0")
    inject_fault(node=node, kind="nic_down", target="ens2np0")
    first = discover(run_shards, "gpu016")
    services.accept_difference(difference=Difference.objects.get(job=first, field="mtu"), user=operator)

    second = discover(run_shards, "gpu016")

    assert Difference.objects.get(job=first, field="link_up").state == DifferenceState.SUPERSEDED
    assert open_differences(second) == {("gpu016", "nic", "ens2np0", "link_up", "up", "down")}  # MTU now agrees


def test_fixing_the_node_puts_its_mtu_right_and_the_next_discovery_finds_nothing(
    demo_cluster, simulator, run_shards, fast_jobs, operator
):
    """The inventory is right, the node wrong (a real fault's MTU 1500): the remediation applies the plan's MTU
    step on the node, and only that step; a discovery afterwards matches the inventory."""
    inject_fault(node=Node.objects.get(hostname="gpu025"), kind="mtu", target="ens1np0")
    job = discover(run_shards, "gpu025")
    mtu = Difference.objects.get(job=job, field="mtu")
    assert (mtu.expected, mtu.discovered) == ("9000", "1500")

    run = services.fix_node(difference=mtu, user=operator)
    run_shards(run.job)
    cells = {cell.step: cell for cell in run.job.steps.all()}
    assert cells["mtu"].status == StepStatus.SUCCEEDED and cells["mtu"].summary.startswith("applied 1 change")
    assert not [c for c in cells.values() if c.step != "mtu" and c.summary.startswith("applied")]
    assert Nic.objects.get(node__hostname="gpu025", name="ens1np0").mtu == 9000

    again = discover(run_shards, "gpu025")
    assert not Difference.objects.filter(job=again, field="mtu").exists()
