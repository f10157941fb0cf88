"""dmesg: a quiet boot, then the kernel's own words for each fault (NVRM Xid lines, link changes, PCIe downgrades)."""

from apps.simulator.state import KERNEL_RELEASE, SimGpu
from apps.simulator.terminal import Context
from apps.simulator.tools.loader import stall_lines


def _stamp(seconds: float) -> str:
    return f"[{seconds:>12.6f}]"


def _boot_lines(context: Context) -> list[str]:
    state = context.state
    lines = [
        f"Linux version {KERNEL_RELEASE} (buildd@lcy02-amd64-040) (x86_64-linux-gnu-gcc-12 "
        "(Ubuntu 12.3.0-1ubuntu1~22.04) 12.3.0, GNU ld (GNU Binutils for Ubuntu) 2.38) "
        "#63~22.04.1-Ubuntu SMP PREEMPT_DYNAMIC",
        f"DMI: Supermicro SYS-821GE-TNHR/X13DEG-OAD, BIOS {state.bios} 10/08/2026",
        f"Memory: {state.memory_gib * 1024 * 1024 - 9437184}K/{state.memory_gib * 1024 * 1024}K available",
    ]
    lines += [f"mlx5_core {nic.pci_address}: firmware version: {nic.firmware}" for nic in state.rdma_nics]
    lines.append("nvidia-nvlink: Nvlink Core is being initialized, major device number 234")
    lines.append(
        f"NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  {state.driver_version}  Release Build  "
        "(dvs-builder@U22-I3-AF03-09-1)  Tue Oct 14 19:33:52 UTC 2026"
    )
    for nic in state.data_nics:
        if nic.link_up:
            lines.append(f"mlx5_core {nic.pci_address} {nic.name}: Link up")
    return lines


def _gpu_tag(gpu: SimGpu) -> str:
    return f"PCI:{gpu.short_bus_id}"


def _fault_lines(context: Context) -> list[str]:
    state = context.state
    lines = []
    for gpu in state.gpus:
        if gpu.pcie_gen:
            speed = {1: "2.5", 2: "5.0", 3: "8.0", 4: "16.0", 5: "32.0", 6: "64.0"}
            lanes = {1: 2.0, 2: 4.0, 3: 7.877, 4: 15.754, 5: 31.508, 6: 63.015}
            available = lanes[gpu.link_gen] * gpu.pcie_width
            capable = lanes[gpu.pcie_gen_max] * 16
            lines.append(
                f"pci 0000:{gpu.bus.lower()}:00.0: {available:.3f} Gb/s available PCIe bandwidth, limited by "
                f"{speed[gpu.link_gen]} GT/s PCIe x{gpu.pcie_width} link at 0000:{int(gpu.bus, 16) - 1:02x}:00.0 "
                f"(capable of {capable:.3f} Gb/s with {speed[gpu.pcie_gen_max]} GT/s PCIe x16 link)"
            )
    for nic in state.data_nics:
        if not nic.link_up:
            lines.append(f"mlx5_core {nic.pci_address} {nic.name}: Link down")
    for gpu in state.gpus:
        tag = _gpu_tag(gpu)
        if gpu.nvlinks_down:
            link = gpu.nvlinks_down[0]
            lines.append(
                f"NVRM: Xid ({tag}): 74, pid='<unknown>', name=<unknown>, NVLink: fatal error detected on link "
                f"{link}(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)"
            )
        if gpu.ecc_uncorrectable:
            lines.append(
                f"NVRM: Xid ({tag}): 48, pid=48213, name=python3, An uncorrectable double bit error (DBE) has been "
                "detected on GPU in the framebuffer at partition 6, subpartition 0."
            )
            lines.append(
                f"NVRM: Xid ({tag}): 63, pid=48213, name=python3, Row Remapper: New row (0x00000000001a4f20) "
                "marked for remapping, reset gpu to activate."
            )
        if not gpu.present:
            lines.append(f"NVRM: GPU at {tag}: {gpu.uuid}")
            lines.append(f"NVRM: GPU Board Serial Number: {gpu.serial}")
            lines.append(f"NVRM: Xid ({tag}): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.")
            lines.append(f"NVRM: GPU {gpu.short_bus_id}.0: GPU has fallen off the bus.")
    lines += stall_lines(context)
    for volume in state.volumes:
        if volume.full and volume.is_local:
            device = "md0" if volume.kind == "hot" else "nvme0n1p2"
            lines.append(f"EXT4-fs warning (device {device}): ext4_da_write_end: No space left on device")
    return lines


def kernel_log(context: Context) -> str:
    lines = []
    seconds = 0.0
    for text in _boot_lines(context):
        seconds += 0.412731
        lines.append(f"{_stamp(seconds)} {text}")
    seconds = 86_400.0  # faults show up a day after boot
    for text in _fault_lines(context):
        seconds += 1.018204
        lines.append(f"{_stamp(seconds)} {text}")
    return "\n".join(lines) + "\n"
