"""The kernel-log producer: each compute node's kernel log read by one `kernel-log` job (here over the sim transport),
its Xid and PCIe AER lines through the triage rules as health events on the GPU their PCI address names, only the
lines logged since the last read (a per-node high-water mark), citing the lines and their numbers. Real kernel
logs (tests/fixtures/real/dmesg-xid) are read the same way."""

import datetime as dt
from pathlib import Path

import pytest
from django.conf import settings

from apps.health.choices import Severity, Source
from apps.health.models import HealthEvent
from apps.inventory.choices import PowerState
from apps.inventory.demo import ClusterShape, load_cluster
from apps.inventory.models import Gpu, Node
from apps.jobs.choices import JobStatus
from apps.monitoring import kernel_log, watch
from apps.monitoring.models import KernelLogMark
from apps.simulator import services as simulator
from apps.simulator.models import SimFault
from apps.simulator.tools import kernel_log as simulated_dmesg

pytestmark = pytest.mark.django_db(transaction=True)  # a job's events are written outside the test's transaction

NOW = 1_790_000_000 // 86_400 * 86_400 + 12 * 3600  # a fixed noon
REAL = Path(__file__).parents[1] / "fixtures" / "real" / "dmesg-xid"


def _at(seconds: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(seconds, tz=dt.UTC)


@pytest.fixture
def fleet(transactional_db, monkeypatch, on_the_simulator):
    load_cluster(ClusterShape(compute_nodes=2, nodes_per_rack=2, management_nodes=0))
    Node.objects.update(created=_at(NOW - 86_400))
    monkeypatch.setattr(simulated_dmesg, "_now", lambda: clock["now"])
    clock = {"now": NOW}
    return {node.hostname: node for node in Node.objects.all()}, clock


def _inject(node, kind, target, since, **parameters):
    fault = simulator.inject_fault(node=node, kind=kind, target=target, parameters=parameters)
    SimFault.objects.filter(pk=fault.pk).update(created=_at(since))


def _read(run_shards):
    job = kernel_log.schedule_read()
    assert job is not None and job.kind == "kernel-log" and job.transport == "sim"
    job = run_shards(job)
    assert job.status == JobStatus.SUCCEEDED
    return job


def _open():
    return {(event.node.hostname, event.kind): event for event in HealthEvent.objects.all()}


def test_the_read_is_one_of_the_periodic_tasks():
    assert settings.RACKPILOT_PERIODIC_TASKS["rackpilot.monitoring.read_kernel_logs"] == 300


def test_a_node_powered_off_is_not_read(fleet):
    Node.objects.filter(hostname="gpu002").update(power_state=PowerState.OFF)
    job = kernel_log.schedule_read()
    assert list(job.steps.values_list("hostname", flat=True).distinct()) == ["gpu001"]


def test_xid_and_aer_lines_on_the_simulated_nodes_are_events_on_their_gpus_once(fleet, run_shards):
    nodes, clock = fleet
    _inject(nodes["gpu001"], "xid79", "2", NOW - 600)
    _inject(nodes["gpu002"], "pcie_downtrained", "3", NOW - 3600)  # a corrected receiver error each minute since

    job = _read(run_shards)

    events = _open()
    assert set(events) == {
        ("gpu001", "xid79"),
        ("gpu001", "pcie_aer_uncorrected"),
        ("gpu002", "pcie_aer_corrected"),
    }
    gpu2, gpu3 = Gpu.objects.get(node__hostname="gpu001", index=2), Gpu.objects.get(node__hostname="gpu002", index=3)
    fell_off = events[("gpu001", "xid79")]
    assert (fell_off.gpu, fell_off.source, fell_off.severity) == (gpu2, Source.KERNEL_LOG, Severity.CRITICAL)
    assert fell_off.first_seen == _at(NOW - 600).replace(microsecond=fell_off.first_seen.microsecond)
    observation = fell_off.evidence[0]
    assert observation["job"] == str(job.public_id) and observation["command"].startswith("dmesg --time-format iso")
    assert any("NVRM: Xid (PCI:0000:" in line and ": 79," in line for line in observation["lines"])
    output = job.steps.get(node__hostname="gpu001").artifacts.get(stream="stdout").text().splitlines()
    for number, line in zip(observation["line_numbers"], observation["lines"], strict=True):
        assert output[number - 1] == line  # each cited line is that line of the read's output
    uncorrected = events[("gpu001", "pcie_aer_uncorrected")]
    assert (uncorrected.gpu, uncorrected.severity) == (gpu2, Severity.MAJOR)
    assert "severity=Uncorrected (Fatal)" in "\n".join(uncorrected.evidence[0]["lines"])
    corrected = events[("gpu002", "pcie_aer_corrected")]
    assert (corrected.gpu, corrected.severity, corrected.evidence[0]["corrected"]) == (gpu3, Severity.MINOR, 10)
    assert KernelLogMark.objects.get(node=nodes["gpu002"]).read_until > _at(NOW - 60)

    # Read again at once: nothing new logged, nothing counted again.
    _read(run_shards)
    assert [(event.kind, event.count) for event in HealthEvent.objects.order_by("kind")] == [
        ("pcie_aer_corrected", 1),
        ("pcie_aer_uncorrected", 1),
        ("xid79", 1),
    ]
    # Two minutes on: two corrected errors since the last read, below the rate that makes an observation.
    clock["now"] = NOW + 120
    _read(run_shards)
    corrected.refresh_from_db()
    assert corrected.count == 1
    # Five minutes more: five of them since the read before, one more observation.
    clock["now"] = NOW + 420
    _read(run_shards)
    corrected.refresh_from_db()
    assert (corrected.count, corrected.evidence[-1]["corrected"]) == (2, 5)


def test_the_kernel_log_and_the_telemetry_watch_fold_into_one_event(fleet, run_shards):
    nodes, _ = fleet
    _inject(nodes["gpu002"], "xid79", "5", NOW - 300)
    watch.watch_telemetry(now=NOW - 240)
    _read(run_shards)
    [event] = HealthEvent.objects.filter(kind="xid79")
    assert (event.gpu.node.hostname, event.gpu.index) == ("gpu002", 5)
    assert set(event.sources) == {Source.TELEMETRY, Source.KERNEL_LOG}


def _stamped(lines: list[str], start: dt.datetime) -> str:
    """Real kernel lines as `dmesg --time-format iso` prints them, a millisecond apart from `start`."""
    return "".join(
        f"{(start + dt.timedelta(milliseconds=k)).strftime('%Y-%m-%dT%H:%M:%S,%f')}+00:00 {line}\n"
        for k, line in enumerate(lines)
    )


@pytest.fixture
def node(transactional_db):
    load_cluster(ClusterShape(compute_nodes=1, nodes_per_rack=1, management_nodes=0))
    return Node.objects.get()


def _placed(node: Node, index: int, pci_bus_id: str) -> Gpu:
    """The node's GPU `index` moved to the PCI address a real log names."""
    Gpu.objects.filter(node=node, index=index).update(pci_bus_id=pci_bus_id)
    return Gpu.objects.get(node=node, index=index)


def test_a_real_decoded_iso_log_is_read_up_to_its_mark_once(node):
    text = (REAL / "gpud-dmesg-decode-iso-xid13-sm-warp-exceptions-then-xid43-pt_main_thread-partial.txt").read_text()
    gpu = _placed(node, 1, "00000000:38:00.0")

    events = kernel_log.record_kernel_log(node=node, text=text)

    by_kind = {event.kind: event for event in events}
    assert set(by_kind) == {"xid13", "xid43"}
    assert by_kind["xid13"].gpu == gpu and by_kind["xid13"].severity == Severity.MINOR  # the application's
    assert by_kind["xid13"].evidence[0]["line_numbers"] == list(range(7, 17))  # the newest ten of its sixteen
    assert by_kind["xid43"].first_seen == dt.datetime(2025, 1, 21, 4, 41, 44, 287197, tzinfo=dt.UTC)  # its line's
    mark = KernelLogMark.objects.get(node=node).read_until
    assert kernel_log.record_kernel_log(node=node, text=text) == []  # the same log again: nothing new
    later = text + f"kern  :warn  : 2025-01-21T05:00:00,000000+00:00 {text.splitlines()[0].split(' : ', 2)[-1][33:]}\n"
    [again] = kernel_log.record_kernel_log(node=node, text=later)
    assert (again.kind, again.count, again.evidence[-1]["line_numbers"]) == ("xid13", 2, [len(later.splitlines())])
    assert KernelLogMark.objects.get(node=node).read_until > mark


def test_a_real_aer_block_is_an_uncorrected_error_on_the_root_port_s_node(node):
    lines = [
        line.split("] ", 1)[1]
        for line in (REAL / "aer-multiple-uncorrected-fatal-sdes-cmpltto-nvidia-cant-recover-dmesg-H-relative-returnn-"
                     "issue1500.txt").read_text().splitlines()
    ]  # fmt: skip
    [event] = kernel_log.record_kernel_log(node=node, text=_stamped(lines, dt.datetime(2024, 1, 21, 9, tzinfo=dt.UTC)))
    # The error is the root port's (pcieport 0000:00:03.0, no inventoried part): the node carries it.
    assert (event.kind, event.severity, event.component_type, event.node) == (
        "pcie_aer_uncorrected",
        Severity.MAJOR,
        "node",
        node,
    )
    assert event.summary == "gpu001: 0000:00:03.0: 1 uncorrected (fatal) PCIe error"
    cited = dict(zip(event.evidence[0]["line_numbers"], event.evidence[0]["lines"], strict=True))
    assert cited[5] == (
        "2024-01-21T09:00:00,004000+00:00 pcieport 0000:00:03.0: PCIe Bus Error: severity=Uncorrected (Fatal), "
        "type=Transaction Layer, (Requester ID)"
    )
    assert cited[6].endswith("pcieport 0000:00:03.0:   device [8086:6f08] error status/mask=00004020/00000000")


def test_a_real_fallen_off_the_bus_banner_without_an_xid_is_xid79_on_its_gpu(node):
    text = REAL / "nvrm-fallen-off-bus-multiline-without-xid-probe-failed-open-570.158.01-nvsentinel-issue155.txt"
    lines = [line.split("] ", 1)[1] if line.startswith("[") else line for line in text.read_text().splitlines()]
    gpu = _placed(node, 4, "00000000:B3:00.0")
    banner = _stamped(lines[:1], dt.datetime(2025, 6, 3, 8, tzinfo=dt.UTC))
    stamped = banner + "".join(f"{line}\n" for line in lines[1:3])  # the banner's continuation lines, unstamped

    [event] = kernel_log.record_kernel_log(node=node, text=stamped)

    assert (event.kind, event.gpu, event.severity) == ("xid79", gpu, Severity.CRITICAL)
    assert event.evidence[0]["line_numbers"] == [1, 2, 3]


def test_a_node_whose_log_has_no_time_stamps_makes_no_events_and_no_mark(node):
    text = (REAL / "journal-kernel-prefix-xid45-caused-by-previous-xid149-xid145-nvlink-590.48.01-open-gpu-kernel-"
            "modules-issue1150-partial.txt").read_text()  # fmt: skip
    assert kernel_log.record_kernel_log(node=node, text=text) == []
    assert not KernelLogMark.objects.exists()


def test_a_switch_tray_down_is_logged_when_it_struck_and_makes_no_event_on_the_trays(monkeypatch, on_the_simulator):
    """Every GPU of the domain logs an Xid 74 when a switch tray goes down: stamped at the fault (not a day after the
    trays' boot, a month early) and left to the NVLink watch, which names the switch tray: no tray made unhealthy."""
    load_cluster(ClusterShape(compute_nodes=2, nodes_per_rack=2, management_nodes=0, rack_scale_racks=1))
    Node.objects.update(created=_at(NOW - 30 * 86_400))  # racked a month ago, as the demo's history has it
    monkeypatch.setattr(simulated_dmesg, "_now", lambda: NOW)
    _inject(Node.objects.get(hostname="nvl01-t01"), "nvswitch_tray_down", "3", NOW - 600)
    other = Node.objects.get(hostname="nvl01-t05")

    output = simulator.run_command(node=other, argv=["dmesg", "--time-format", "iso"], seed=0, load=0.0).stdout

    xid74 = [line for line in output.splitlines() if ": 74, " in line]
    assert len(xid74) == 4 and all(line.startswith(_at(NOW - 600).strftime("%Y-%m-%dT%H:%M:%S")) for line in xid74)
    assert kernel_log.record_kernel_log(node=other, text=output) == []
    assert not HealthEvent.objects.exists()
