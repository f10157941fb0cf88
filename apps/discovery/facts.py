"""Fact families: which parser reads each discovery command, and the plain-JSON facts kept from its result.

Pure functions on text (no database): a command's output goes in, a JSON-able dict comes out, or ParseError.
"""

import re
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from apps.core.text import counted
from apps.discovery.choices import FactFamily
from apps.nodeexec.catalogue import SECTION_MARK
from apps.parsers import network, nvidia_smi, system
from apps.parsers.common import split_lines
from apps.parsers.errors import ParseError

VERSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+:-]{0,63}\Z")

# The NICs column runs the catalogue's NIC facts script: the tool names in its section marks, the fact family
# each one's output is read as, and the command as an operator would type it.
NIC_PARTS = {
    "ethtool": (FactFamily.SPEED, "ethtool"),
    "ethtool-i": (FactFamily.NIC_FIRMWARE, "ethtool -i"),
    "mlnx_qos": (FactFamily.QOS, "mlnx_qos"),
}


def step_name(family: str, interface: str | None = None) -> str:
    """A matrix column is a family; what is read of one interface is keyed "<family>:<interface>"."""
    return f"{family}:{interface}" if interface else str(family)


def split_step(name: str) -> tuple[str, str | None]:
    family, _, interface = name.partition(":")
    return family, interface or None


def tool_failure(tool: str, exit_code: int | None, stderr: str) -> str:
    """Why a tool that ran gave no output to read: not installed, or its exit status and first error line."""
    lines = stderr.strip().splitlines()
    last = lines[-1] if lines else ""
    if exit_code == 127 or "command not found" in last or last.endswith(": not found"):
        return f"{tool} is not installed (not found on the node)"
    return f"{tool} exited {exit_code}" + (f": {lines[0][:200]}" if lines else "")


def pci_key(address: str | None) -> str:
    """One spelling for a PCI address: 00000000:18:00.0, 0000:18:00.0 and 18:00.0 all give 0000:18:00.0."""
    if not address:
        return ""
    parts = address.strip().lower().split(":")
    if len(parts) == 2:
        parts = ["0", *parts]
    if len(parts) != 3:
        return address.strip().lower()
    try:
        return f"{int(parts[0], 16):04x}:{parts[1]}:{parts[2]}"
    except ValueError:
        return address.strip().lower()


def firmware_version(text: str | None) -> str | None:
    """The version word of a firmware string: '28.41.1000 (MT_0000000838)' → '28.41.1000'."""
    if not text:
        return None
    word = text.split()[0]
    return word if VERSION.match(word) else None


# --- one reader per family ------------------------------------------------------------------------------------


def _gpus(text: str) -> dict:
    report = nvidia_smi.parse_query_gpu(text, nvidia_smi.QUERY_GPU_FIELDS)
    if not report.gpus:
        raise ParseError("expected one CSV line per GPU from nvidia-smi --query-gpu, got none", 1)
    keep = (
        "index",
        "uuid",
        "name",
        "serial",
        "pci_bus_id",
        "driver_version",
        "vbios_version",
        "memory_total_mib",
        "pcie_gen_current",
        "pcie_gen_max",
        "pcie_width_current",
        "pcie_width_max",
    )
    gpus = [{key: getattr(gpu, key) for key in keep} for gpu in report.gpus]
    return {"gpus": gpus, "count": len(gpus), "driver_version": gpus[0]["driver_version"]}


def _topology(text: str) -> dict:
    topo = nvidia_smi.parse_topology(text)
    return {
        "gpus": [
            {"name": row.name, "numa_affinity": row.numa_affinity, "cpu_affinity": row.cpu_affinity, "links": row.links}
            for row in topo.gpus
        ],
        "nics": [{"name": row.name, "device": row.nic_device, "links": row.links} for row in topo.nics],
    }


def _links(text: str) -> dict:
    links = network.parse_ip_link(text)
    return {
        "interfaces": [
            {
                "name": link.name,
                "mtu": link.mtu,
                "state": link.state,
                "carrier": link.carrier,
                "address": link.address,
                "link_type": link.link_type,
            }
            for link in links.links
        ]
    }


def _speed(text: str) -> dict:
    settings = network.parse_ethtool(text)
    return {"interface": settings.interface, "speed_mbps": settings.speed_mbps, "link_detected": settings.link_detected}


def _nic_firmware(text: str) -> dict:
    driver = network.parse_ethtool_driver(text)
    return {
        "driver": driver.driver,
        "firmware": driver.firmware_version,
        "firmware_version": firmware_version(driver.firmware_version),
        "bus_info": driver.bus_info,
    }


def _qos(text: str) -> dict:
    qos = network.parse_mlnx_qos(text)
    if len(qos.pfc_enabled) != 8:
        raise ParseError("expected the PFC 'enabled' row of mlnx_qos (8 priorities)", 1)
    return {"trust": qos.trust, "pfc_priorities": qos.pfc_priorities}


@dataclass
class Section:
    """One tool's run inside the NIC facts script."""

    tool: str
    interface: str
    stdout: list[str] = field(default_factory=list)
    exit_code: int | None = None
    stderr: list[str] = field(default_factory=list)


def split_sections(text: str) -> tuple[list[Section], list[str]]:
    """The NIC facts script's output as its sections, and the interfaces the node said it does not have."""
    sections: list[Section] = []
    absent: list[str] = []
    expected = f"a '{SECTION_MARK} TOOL INTERFACE', '{SECTION_MARK} exit N' or '{SECTION_MARK} absent INTERFACE' line"
    lines = split_lines(text.removesuffix("\n"))
    for number, line in enumerate(lines, start=1):
        before, mark, rest = line.partition(SECTION_MARK + " ")
        current = sections[-1] if sections else None
        if current is None and before.strip():
            raise ParseError(f"expected {expected} first", number)
        if current is not None and (before or not mark):  # a mark after output that ended without a newline
            (current.stdout if current.exit_code is None else current.stderr).append(before)
        if not mark:
            continue
        words = rest.split()
        if current is not None and current.exit_code is None and words[:1] != ["exit"]:
            raise ParseError(f"expected '{SECTION_MARK} exit N' to end the {current.tool} section", number)
        if len(words) == 2 and words[0] == "absent":
            absent.append(words[1])
        elif len(words) == 2 and words[0] == "exit" and current is not None and current.exit_code is None:
            if not words[1].isdigit():
                raise ParseError(f"expected an exit status, got {words[1]!r}", number)
            current.exit_code = int(words[1])
        elif len(words) == 2 and words[0] in NIC_PARTS:
            sections.append(Section(tool=words[0], interface=words[1]))
        else:
            raise ParseError(f"expected {expected}", number)
    if sections and sections[-1].exit_code is None:
        raise ParseError(f"output ends inside the {sections[-1].tool} section (truncated)", len(lines))
    if not sections and not absent:
        raise ParseError(f"expected {expected}, got nothing", 1)
    return sections, absent


def _nics(text: str) -> dict:
    """Per interface what each tool said; a tool that failed or printed something else is a could-not-run reason."""
    sections, absent = split_sections(text)
    interfaces: dict[str, dict] = {}
    could_not_run: dict[str, str] = {}
    for section in sections:
        family, command = NIC_PARTS[section.tool]
        key = step_name(family, section.interface)
        if section.exit_code != 0:
            could_not_run[key] = tool_failure(command, section.exit_code, "\n".join(section.stderr))
            continue
        try:
            facts = READERS[family]("\n".join(section.stdout) + "\n")
        except ParseError as error:
            could_not_run[key] = f"{command} output not understood ({error})"
            continue
        interfaces.setdefault(section.interface, {})[family] = facts
    return {"interfaces": interfaces, "absent": absent, "could_not_run": could_not_run}


def _bios(text: str) -> dict:
    lines = [line.strip() for line in split_lines(text) if line.strip()]
    if len(lines) != 1 or not VERSION.match(lines[0]):
        shown = lines[0][:60] if lines else "nothing"
        raise ParseError(f"expected one BIOS version line (/sys/class/dmi/id/bios_version), got {shown!r}", 1)
    return {"version": lines[0]}


def _cpu(text: str) -> dict:
    cpu = system.parse_lscpu(text)
    cores = cpu.sockets * cpu.cores_per_socket if cpu.sockets and cpu.cores_per_socket else None
    return {
        "model": cpu.model_name,
        "architecture": cpu.architecture,
        "sockets": cpu.sockets,
        "cores": cores,
        "threads": cpu.cpus,
        "numa_nodes": cpu.numa_nodes,
    }


def _numa(text: str) -> dict:
    topo = system.parse_numactl(text)
    sizes = [node.size_mb for node in topo.nodes if node.size_mb is not None]
    return {
        "nodes": [{"node": node.node, "cpus": len(node.cpus), "size_mb": node.size_mb} for node in topo.nodes],
        "count": len(topo.nodes),
        "memory_mb": sum(sizes) if sizes else None,
    }


def _disks(text: str) -> dict:
    devices = system.parse_lsblk(text)
    flat: list[dict] = []

    def walk(device, parent: str | None) -> None:
        flat.append(
            {
                "name": device.name,
                "type": device.type,
                "size_bytes": device.size_bytes,
                "model": device.model,
                "rotational": device.rotational,
                "transport": device.transport,
                "mountpoints": device.mountpoints,
                "parent": parent,
            }
        )
        for child in device.children:
            walk(child, device.name)

    for device in devices.devices:
        walk(device, None)
    return {"devices": flat}


READERS: dict[str, Callable[[str], dict]] = {
    FactFamily.GPUS: _gpus,
    FactFamily.TOPOLOGY: _topology,
    FactFamily.LINKS: _links,
    FactFamily.NICS: _nics,
    FactFamily.SPEED: _speed,
    FactFamily.NIC_FIRMWARE: _nic_firmware,
    FactFamily.QOS: _qos,
    FactFamily.BIOS: _bios,
    FactFamily.CPU: _cpu,
    FactFamily.NUMA: _numa,
    FactFamily.DISKS: _disks,
}


def _speed_words(speed: dict) -> str:
    if not speed["link_detected"]:
        return "no link"
    return f"{speed['speed_mbps'] // 1000} Gb/s" if speed["speed_mbps"] else "speed unknown"


def _counted(values: list[str]) -> str:
    """'400 Gb/s ×7, no link ×1', most common first; a value every interface shares is not counted."""
    counts = Counter(values)
    if len(counts) == 1:
        return values[0]
    return ", ".join(f"{value} ×{count}" for value, count in counts.most_common())


def nics_summary(facts: dict) -> str:
    """One line for the NICs cell: what failed first, then speeds, firmware and PFC across the interfaces."""
    parts = []
    failures: dict[str, list[str]] = defaultdict(list)
    for key, reason in facts["could_not_run"].items():
        failures[reason].append(split_step(key)[1])
    if failures:
        parts.append(
            "could not run: " + "; ".join(f"{reason} on {', '.join(names)}" for reason, names in failures.items())
        )
    read = facts["interfaces"]
    if read:
        speeds = [_speed_words(speed) for p in read.values() if (speed := p.get(FactFamily.SPEED))]
        firmware = [f["firmware"] or "?" for p in read.values() if (f := p.get(FactFamily.NIC_FIRMWARE))]
        pfc = [
            ",".join(str(priority) for priority in qos["pfc_priorities"]) or "off"
            for p in read.values()
            if (qos := p.get(FactFamily.QOS))
        ]
        line = counted(len(read), "NIC")
        for label, values in (("", speeds), ("firmware ", firmware), ("PFC ", pfc)):
            if values:
                line += f"; {label}{_counted(values)}"
        parts.append(line)
    if facts["absent"]:
        parts.append(f"not on this node: {', '.join(facts['absent'])}")
    return "; ".join(parts)


@dataclass(frozen=True)
class Reading:
    family: str
    interface: str | None
    facts: dict


def read(step: str, text: str) -> Reading:
    """Parse one cell's stdout; ParseError (with the line) when it is not that tool's output."""
    family, interface = split_step(step)
    try:
        reader = READERS[family]
    except KeyError:
        raise ParseError(f"no fact family {family!r}", 1) from None
    return Reading(family, interface, reader(text))


def summary(reading: Reading) -> str:
    """One line for the matrix cell."""
    facts = reading.facts
    family = reading.family
    if family == FactFamily.GPUS:
        names = sorted({gpu["name"] or "?" for gpu in facts["gpus"]})
        return f"{counted(facts['count'], 'GPU')}: {', '.join(names)}; driver {facts['driver_version'] or '?'}"
    if family == FactFamily.TOPOLOGY:
        return f"{counted(len(facts['gpus']), 'GPU')}, {counted(len(facts['nics']), 'NIC')} in the PCIe matrix"
    if family == FactFamily.LINKS:
        up = sum(1 for link in facts["interfaces"] if link["carrier"])
        return f"{counted(len(facts['interfaces']), 'interface')}, {up} with carrier"
    if family == FactFamily.NICS:
        return nics_summary(facts)
    if family == FactFamily.BIOS:
        return f"BIOS {facts['version']}"
    if family == FactFamily.CPU:
        return f"{facts['sockets'] or '?'} x {facts['model'] or '?'}, {facts['threads'] or '?'} threads"
    if family == FactFamily.NUMA:
        memory = f", {facts['memory_mb'] // 1024} GiB" if facts["memory_mb"] else ""
        return f"{counted(facts['count'], 'NUMA node')}{memory}"
    if family == FactFamily.DISKS:
        disks = [d for d in facts["devices"] if d["type"] == "disk"]
        return f"{counted(len(disks), 'disk')}, {counted(len(facts['devices']), 'block device')}"
    return ""
