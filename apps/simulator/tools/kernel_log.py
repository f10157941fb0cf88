"""dmesg: a quiet boot, then the kernel's own words for each fault (NVRM Xid lines, PCIe AER errors, link changes,
PCIe downgrades), each at the moment its fault struck.

`dmesg` prints seconds since boot (`[   86400.000000]`); `dmesg --time-format iso` the wall-clock time as util-linux
writes it (`2026-12-05T11:40:02,123456+00:00`), which a reader can keep a high-water mark by; `--level` keeps the
lines of those priorities. A fault's lines are stamped at its injection (the node's boot when it struck before, a day
after boot for a state built without times); a downtrained PCIe link goes on logging a corrected receiver error each
minute, the ring buffer keeping the newest AER_KEPT."""

import datetime as dt

from apps.simulator import clock
from apps.simulator.boot import up_since
from apps.simulator.state import KERNEL_RELEASE, SimGpu
from apps.simulator.terminal import CommandOutput, Context, fail, ok
from apps.simulator.tools.loader import stall_lines

BOOT_STEP_S = 0.412731
FAULT_LINE_S = 0.000412  # the lines of one event follow each other within the millisecond
UNTIMED_FAULTS_S = 86_400.0  # a state without fault times (built in a test): faults show up a day after boot
UNTIMED_STEP_S = 1.018204
DRIVER_LOADED_S = 30.0  # a fault that struck before the last boot is logged again when the driver loads
UP_BEFORE_S = 12 * 86_400 + 3 * 3600 + 14 * 60  # a node with no boot time has been up as long as `uptime` says
AER_EVERY_S = 60.0
AER_KEPT = 10
LEVELS = ("emerg", "alert", "crit", "err", "warn", "notice", "info", "debug")
SPEEDS = {1: "2.5", 2: "5.0", 3: "8.0", 4: "16.0", 5: "32.0", 6: "64.0"}
LANE_GBPS = {1: 2.0, 2: 4.0, 3: 7.877, 4: 15.754, 5: 31.508, 6: 63.015}


def _now() -> float:
    return clock.now()


def _boot_lines(context: Context) -> list[tuple[str, str]]:
    state = context.state
    lines = [
        (
            "notice",
            f"Linux version {KERNEL_RELEASE} (buildd@lcy02-amd64-040) (x86_64-linux-gnu-gcc-12 "
            "(Ubuntu 12.3.0-1ubuntu1~22.04) 12.3.0, GNU ld (GNU Binutils for Ubuntu) 2.38) "
            "#63~22.04.1-Ubuntu SMP PREEMPT_DYNAMIC",
        ),
        ("info", f"DMI: Supermicro SYS-821GE-TNHR/X13DEG-OAD, BIOS {state.bios} 10/08/2026"),
        ("info", f"Memory: {state.memory_gib * 1024 * 1024 - 9437184}K/{state.memory_gib * 1024 * 1024}K available"),
    ]
    lines += [("info", f"mlx5_core {nic.pci_address}: firmware version: {nic.firmware}") for nic in state.rdma_nics]
    lines.append(("info", "nvidia-nvlink: Nvlink Core is being initialized, major device number 234"))
    lines.append(
        (
            "info",
            f"NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  {state.driver_version}  Release Build  "
            "(dvs-builder@U22-I3-AF03-09-1)  Tue Oct 14 19:33:52 UTC 2026",
        )
    )
    for nic in state.data_nics:
        if nic.link_up:
            lines.append(("info", f"mlx5_core {nic.pci_address} {nic.name}: Link up"))
    return lines


def _gpu_tag(gpu: SimGpu) -> str:
    return f"PCI:{gpu.short_bus_id}"


def _device(gpu: SimGpu) -> str:
    return f"0000:{gpu.bus.lower()}:00.0"


def _root_port(gpu: SimGpu) -> str:
    return f"0000:{int(gpu.bus, 16) - 1:02x}:00.0"


def _aer(gpu: SimGpu, *, fatal: bool) -> list[tuple[str, str]]:
    """One AER error as the kernel's aer driver reports it: the root port's notice, then the device's error, its
    status and mask, and the bit that fired (`%-22s` padded, as aer.c prints it)."""
    device, ids = _device(gpu), f"10de:{gpu.facts.device_id[:4].lower()}"
    if fatal:  # the completion timeout of a GPU gone from the bus
        severity, kind, status, level = "Uncorrected (Fatal)", "Transaction Layer, (Requester ID)", "00004000", "err"
        mask, bit, name = "00000000", 14, "CmpltTO"
    else:  # a receiver error on a marginal link, fixed by the link layer's replay
        severity, kind, status, level = "Corrected", "Physical Layer, (Receiver ID)", "00000001", "warn"
        mask, bit, name = "00002000", 0, "RxErr"
    return [
        ("info", f"pcieport {_root_port(gpu)}: AER: {severity} error received: {device}"),
        (level, f"nvidia {device}: PCIe Bus Error: severity={severity}, type={kind}"),
        (level, f"nvidia {device}:   device [{ids}] error status/mask={status}/{mask}"),
        (level, f"nvidia {device}:    [{bit:>2}] {name:<22} (First)"),
    ]


# Faults that take a GPU's NVLink links down without naming the GPU: its tray's cartridge, a switch tray of the domain.
NVLINK_FAULTS_OF_THE_TRAY = ("tray_nvlink_degraded", "nvswitch_tray_down")


def _nvlink_cause(state, gpu: SimGpu) -> tuple[str, str]:
    """The fault whose time the GPU's Xid 74 line takes: its own link fault, else its tray's or its domain's."""
    own = ("nvlink_down", str(gpu.index))
    if own in state.fault_since:
        return own
    return next((key for key in sorted(state.fault_since) if key[0] in NVLINK_FAULTS_OF_THE_TRAY), own)


def _fault_groups(context: Context) -> list[tuple[tuple[str, str] | None, list[tuple[str, str]]]]:
    """(the fault that caused them, by (kind, target); the kernel's lines) in the order the kernel prints them."""
    state = context.state
    groups: list = []
    for gpu in state.gpus:
        if gpu.pcie_gen:
            available = LANE_GBPS[gpu.link_gen] * gpu.pcie_width
            capable = LANE_GBPS[gpu.pcie_gen_max] * 16
            line = (
                f"pci {_device(gpu)}: {available:.3f} Gb/s available PCIe bandwidth, limited by "
                f"{SPEEDS[gpu.link_gen]} GT/s PCIe x{gpu.pcie_width} link at {_root_port(gpu)} "
                f"(capable of {capable:.3f} Gb/s with {SPEEDS[gpu.pcie_gen_max]} GT/s PCIe x16 link)"
            )
            groups.append((("pcie_downtrained", str(gpu.index)), [("info", line)]))
    for nic in state.data_nics:
        if not nic.link_up:
            groups.append((("nic_down", nic.name), [("info", f"mlx5_core {nic.pci_address} {nic.name}: Link down")]))
    for gpu in state.gpus:
        tag = _gpu_tag(gpu)
        if gpu.nvlinks_down:
            link = gpu.nvlinks_down[0]
            line = (
                f"NVRM: Xid ({tag}): 74, pid='<unknown>', name=<unknown>, NVLink: fatal error detected on link "
                f"{link}(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)"
            )
            groups.append((_nvlink_cause(state, gpu), [("warn", line)]))
        if gpu.ecc_uncorrectable:
            lines = [
                (
                    "warn",
                    f"NVRM: Xid ({tag}): 48, pid=48213, name=python3, An uncorrectable double bit error (DBE) has "
                    "been detected on GPU in the framebuffer at partition 6, subpartition 0.",
                ),
                (
                    "warn",
                    f"NVRM: Xid ({tag}): 63, pid=48213, name=python3, Row Remapper: New row (0x00000000001a4f20) "
                    "marked for remapping, reset gpu to activate.",
                ),
            ]
            groups.append((("ecc", str(gpu.index)), lines))
        if not gpu.present:
            lines = _aer(gpu, fatal=True) + [
                ("info", f"NVRM: GPU at {tag}: {gpu.uuid}"),
                ("info", f"NVRM: GPU Board Serial Number: {gpu.serial}"),
                ("warn", f"NVRM: Xid ({tag}): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."),
                ("err", f"NVRM: GPU {gpu.short_bus_id}.0: GPU has fallen off the bus."),
            ]
            groups.append((("xid79", str(gpu.index)), lines))
    stalls = stall_lines(context)
    if stalls:
        groups.append((None, [("warn", line) for line in stalls]))
    for volume in state.volumes:
        if volume.full and volume.is_local:
            device = "md0" if volume.kind == "hot" else "nvme0n1p2"
            line = f"EXT4-fs warning (device {device}): ext4_da_write_end: No space left on device"
            groups.append((("disk_full", volume.mount_point), [("warn", line)]))
    return groups


def kernel_entries(context: Context, *, now: float | None = None) -> tuple[float, list[tuple[float, str, str]]]:
    """(when the node booted, its kernel log as (seconds since boot, level, text)), oldest first."""
    state = context.state
    now = _now() if now is None else now
    booted = up_since(state.boot) or state.booted_at
    timed = booted is not None
    booted = booted if booted is not None else now - UP_BEFORE_S
    entries = [((k + 1) * BOOT_STEP_S, level, text) for k, (level, text) in enumerate(_boot_lines(context))]
    untimed = UNTIMED_FAULTS_S
    for fault, lines in _fault_groups(context):
        since = state.fault_since.get(fault) if fault is not None and timed else None
        if since is None:
            for level, text in lines:
                untimed += UNTIMED_STEP_S
                entries.append((untimed, level, text))
            continue
        start = max(since - booted, DRIVER_LOADED_S)
        entries += [(start + k * FAULT_LINE_S, level, text) for k, (level, text) in enumerate(lines)]
        if fault[0] == "pcie_downtrained":  # the marginal link keeps erring: one corrected error a minute
            gpu = state.gpu(int(fault[1]))
            repeats = int(max(0.0, now - booted - start) // AER_EVERY_S)
            corrected = _aer(gpu, fatal=False)
            for k in range(max(1, repeats - AER_KEPT + 1), repeats + 1):
                at = start + k * AER_EVERY_S
                entries += [(at + j * FAULT_LINE_S, level, text) for j, (level, text) in enumerate(corrected)]
    entries.sort(key=lambda entry: entry[0])
    return booted, entries


def _iso(moment: float) -> str:
    """util-linux's --time-format iso: microseconds after a comma, the UTC offset."""
    stamp = dt.datetime.fromtimestamp(moment, tz=dt.UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S,") + f"{stamp.microsecond:06d}+00:00"


def kernel_log(context: Context, *, iso: bool = False, levels: set[str] | None = None) -> str:
    booted, entries = kernel_entries(context)
    lines = []
    for seconds, level, text in entries:
        if levels is not None and level not in levels:
            continue
        stamp = _iso(booted + seconds) if iso else f"[{seconds:>12.6f}]"
        lines.append(f"{stamp} {text}")
    return "\n".join(lines) + "\n"


def dmesg(context: Context, argv: list[str]) -> CommandOutput:
    """dmesg [--time-format iso] [--level LIST]: what the catalogue runs (`dmesg`, and the kernel-log read)."""
    args, iso, levels = argv[1:], False, None
    while args:
        option, args = args[0], args[1:]
        if option in ("--time-format", "--level") and args:
            value, args = args[0], args[1:]
        elif option.startswith(("--time-format=", "--level=")):
            option, value = option.split("=", 1)
        else:
            return fail(1, f"dmesg: unrecognized option '{option}'\n")
        if option == "--time-format":
            if value != "iso":
                return fail(1, f"dmesg: unknown time format: {value}\n")
            iso = True
        else:
            levels = set(value.split(","))
            if unknown := levels - set(LEVELS):
                return fail(1, f"dmesg: unknown level '{sorted(unknown)[0]}'\n")
    return ok(kernel_log(context, iso=iso, levels=levels))
