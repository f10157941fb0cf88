"""The BMC event log as a health-event producer: the simulated SEL that faults append to, read over IPMI and
Redfish, each record recorded once (the high-water mark), informational ones skipped; the mark's rules; the
schedule."""

from datetime import UTC, datetime

import pytest
from django.conf import settings as django_settings

from apps.health.models import HealthEvent
from apps.inventory.choices import GpuHealth
from apps.inventory.models import Gpu
from apps.jobs.choices import JobStatus
from apps.jobs.models import Job
from apps.jobs.services import TargetSpec, create_job
from apps.monitoring.bmc import polling
from apps.monitoring.bmc.sel import SelRecord, classify, new_records, record_sel
from apps.monitoring.models import Bmc
from apps.parsers.ipmi import parse_sel_elist
from apps.simulator import services as simulator
from tests.parsers.helpers import real

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def read_sel(run_shards):
    def run(*nodes, transport="sim"):
        job = create_job(
            kind="bmc-sel", targets=TargetSpec(nodes=tuple(node.hostname for node in nodes)), transport=transport
        )
        return run_shards(job)

    return run


@pytest.mark.parametrize("protocol", ["ipmi", "redfish"])
def test_a_fault_in_the_sel_becomes_one_health_event_and_a_reread_adds_nothing(gpu_node, sim_bmc, read_sel, protocol):
    sim_bmc(protocol=protocol)
    simulator.inject_fault(node=gpu_node, kind="ecc", target="2", parameters={"count": 3})
    simulator.inject_fault(node=gpu_node, kind="xid79", target="5")

    job = read_sel(gpu_node)

    assert job.status == JobStatus.SUCCEEDED, job.steps.get().summary
    events = {event.kind: event for event in HealthEvent.objects.filter(source="bmc_log")}
    assert set(events) == {"bmc_gpu_memory_ecc", "bmc_pcie_fatal"}  # the GPU's HBM, not a DIMM
    ecc = events["bmc_gpu_memory_ecc"]
    gpu = Gpu.objects.get(node=gpu_node, index=2)  # the SEL's GPU3 is nvidia-smi's GPU 2, where the fault is
    assert (ecc.gpu, ecc.node, ecc.component_type, ecc.severity) == (gpu, gpu_node, "gpu", "critical")
    assert gpu.health == GpuHealth.FAILED  # the GPU's health shows it
    assert "GPU3 HBM" in ecc.evidence[0]["lines"][0] and "Uncorrectable ECC" in ecc.evidence[0]["lines"][0]
    fallen = events["bmc_pcie_fatal"]  # the bus error of the GPU that fell off it (XID 79 on GPU 5): that GPU's
    assert (fallen.gpu, fallen.evidence[0]["gpu_index"]) == (Gpu.objects.get(node=gpu_node, index=5), 5)
    assert ecc.evidence[0]["gpu_index"] == 2
    if protocol == "ipmi":  # the summary says which index the SEL's GPU3 is
        assert "GPU3 (SEL, = GPU 2) HBM" in ecc.summary
    mark = Bmc.objects.get(node=gpu_node).sel_mark
    assert mark["record_id"] == 3  # record 1 is the log-cleared one

    read_sel(gpu_node)

    assert HealthEvent.objects.filter(source="bmc_log").count() == 2
    assert sum(event.count for event in HealthEvent.objects.filter(source="bmc_log")) == 2  # nothing folded twice


def test_a_gpu_memory_record_naming_a_gpu_the_node_lacks_stays_on_the_node(gpu_node, sim_bmc):
    sim_bmc()
    now = datetime(2026, 3, 1, 12, tzinfo=UTC)
    line = "   7 | 03/01/2026 | 11:59:00 | Memory GPU9 HBM | Uncorrectable ECC | Asserted"
    record = SelRecord(7, "2026-03-01T11:59:00", "Memory", "GPU9 HBM", "Uncorrectable ECC", True, line)

    assert record_sel(node_id=gpu_node.pk, records=[record], now=now) == 1

    event = HealthEvent.objects.get(kind="bmc_gpu_memory_ecc")  # GPU 8 of an 8-GPU node (0-7): not inventoried
    assert (event.gpu, event.node, event.component_type, event.evidence[0]["gpu_index"]) == (None, gpu_node, "node", 8)


def test_only_records_after_the_mark_are_recorded(gpu_node, sim_bmc, read_sel):
    sim_bmc()
    read_sel(gpu_node)
    assert not HealthEvent.objects.filter(source="bmc_log").exists()  # the log-cleared record makes none

    simulator.inject_fault(node=gpu_node, kind="thermal", target="0", parameters={"temperature": 95})
    read_sel(gpu_node)

    (event,) = HealthEvent.objects.filter(source="bmc_log")
    assert (event.kind, event.severity) == ("bmc_temperature_critical", "critical")
    assert "GPU1 (SEL, = GPU 0) Temp" in event.summary  # the SEL counts GPUs from 1
    assert event.gpu == Gpu.objects.get(node=gpu_node, index=0)  # on the GPU its sensor names, not the node


def test_real_sel_records_are_classified():
    ecc = parse_sel_elist(
        real("ipmi-sel/ipmitool-sel-elist-uncorrectable-ecc-os-critical-stop-partial-argon-hpc-notes.txt")
    )
    psu = parse_sel_elist(real("ipmi-sel/ipmitool-sel-elist-psu-failure-detected-partial-argon-hpc-notes.txt"))

    def kinds(log):
        records = [
            SelRecord(e.record_id, e.timestamp, e.sensor_type, e.sensor, e.event, e.direction != "Deasserted", e.line)
            for e in log.entries
        ]
        return [(r.record_id, f.kind) for r in records if (f := classify(r)) is not None]

    assert kinds(ecc) == [(0x54, "bmc_memory_ecc"), (0x55, "bmc_os_critical_stop"), (0x5C, "bmc_os_critical_stop")]
    assert kinds(psu) == [(0x34, "bmc_psu_failure")]  # not 'Presence detected', nor the Power Unit's off/down


def _record(record_id, timestamp):
    return SelRecord(record_id, timestamp, "Memory", "DIMM A1", "Uncorrectable ECC", True, f"{record_id}")


def test_the_mark_survives_a_cleared_log_and_the_first_read_takes_one_day():
    now = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
    log = [_record(1, "2025-01-01T00:00:00"), _record(2, "2026-03-02T11:00:00"), _record(3, "2026-03-02T11:30:00")]

    assert [r.record_id for r in new_records(log, {}, now=now)] == [2, 3]
    assert [r.record_id for r in new_records(log, {"record_id": 2, "timestamp": "2026-03-02T11:00:00"}, now=now)] == [3]
    cleared = [_record(1, "2026-03-02T11:45:00"), _record(2, "2026-03-02T11:50:00")]
    mark = {"record_id": 3, "timestamp": "2026-03-02T11:30:00"}
    assert [r.record_id for r in new_records(cleared, mark, now=now)] == [1, 2]  # ids restarted: read by time


def test_the_schedule_starts_one_read_at_a_time(gpu_node, sim_bmc):
    assert django_settings.RACKPILOT_PERIODIC_TASKS["rackpilot.monitoring.read_bmc_sels"] == 300
    assert polling.schedule_sel_reads() is None  # no node has BMC settings yet
    sim_bmc()

    job = polling.schedule_sel_reads()

    assert job.kind == "bmc-sel" and list(job.nodes.all()) == [gpu_node]
    assert polling.schedule_sel_reads() is None  # the first is still queued
    assert Job.objects.filter(kind="bmc-sel").count() == 1


# --- real emulators -------------------------------------------------------------------------------------------------


def test_ipmi_sim_sel_is_read_over_lanplus(ipmi_sim, emulated_node, read_sel):
    node = emulated_node("ipmi", ipmi_sim.port)

    job = read_sel(node, transport="local")

    cell = job.steps.get()
    assert cell.status == "succeeded", cell.summary
    assert cell.summary.endswith("SEL records")
    assert Bmc.objects.get(node=node).sel_read is not None


def test_sushy_sel_read_says_what_the_service_lacks(sushy, emulated_node, read_sel):
    node = emulated_node("redfish", sushy.port, verify_tls=False)

    job = read_sel(node, transport="local")

    cell = job.steps.get()
    assert cell.status == "succeeded", cell.summary
    assert "SEL records" in cell.summary or "no event log read" in cell.summary
