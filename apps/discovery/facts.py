"""Fact families: which parser reads each discovery command, and the plain-JSON facts kept from its result.

Pure functions on text (no database): a command's output goes in, a JSON-able dict comes out, or ParseError.
"""

import re
from collections.abc import Callable
from dataclasses import dataclass

from apps.discovery.choices import FactFamily
from apps.parsers import network, nvidia_smi, system
from apps.parsers.errors import ParseError

# Step names: one column per family; per-interface families are "<family>:<interface>".
PER_INTERFACE = (FactFamily.SPEED, FactFamily.NIC_FIRMWARE, FactFamily.QOS)
VERSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+:-]{0,63}$")


def step_name(family: str, interface: str | None = None) -> str:
    return f"{family}:{interface}" if interface else str(family)


def split_step(name: str) -> tuple[str, str | None]:
    family, _, interface = name.partition(":")
    return family, interface or None


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


def _bios(text: str) -> dict:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
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
    FactFamily.SPEED: _speed,
    FactFamily.NIC_FIRMWARE: _nic_firmware,
    FactFamily.QOS: _qos,
    FactFamily.BIOS: _bios,
    FactFamily.CPU: _cpu,
    FactFamily.NUMA: _numa,
    FactFamily.DISKS: _disks,
}


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
        return f"{facts['count']} GPU(s): {', '.join(names)}; driver {facts['driver_version'] or '?'}"
    if family == FactFamily.TOPOLOGY:
        return f"{len(facts['gpus'])} GPU(s), {len(facts['nics'])} NIC(s) in the PCIe matrix"
    if family == FactFamily.LINKS:
        up = sum(1 for link in facts["interfaces"] if link["carrier"])
        return f"{len(facts['interfaces'])} interface(s), {up} with carrier"
    if family == FactFamily.SPEED:
        speed = f"{facts['speed_mbps'] // 1000} Gb/s" if facts["speed_mbps"] else "speed unknown"
        return f"{speed}, link {'detected' if facts['link_detected'] else 'not detected'}"
    if family == FactFamily.NIC_FIRMWARE:
        return f"{facts['driver']} firmware {facts['firmware'] or '?'}"
    if family == FactFamily.QOS:
        pfc = ",".join(str(p) for p in facts["pfc_priorities"]) or "off"
        return f"trust {facts['trust'] or '?'}, PFC on priority {pfc}"
    if family == FactFamily.BIOS:
        return f"BIOS {facts['version']}"
    if family == FactFamily.CPU:
        return f"{facts['sockets'] or '?'} x {facts['model'] or '?'}, {facts['threads'] or '?'} threads"
    if family == FactFamily.NUMA:
        memory = f", {facts['memory_mb'] // 1024} GiB" if facts["memory_mb"] else ""
        return f"{facts['count']} NUMA node(s){memory}"
    if family == FactFamily.DISKS:
        disks = [d for d in facts["devices"] if d["type"] == "disk"]
        return f"{len(disks)} disk(s), {len(facts['devices'])} block device(s)"
    return ""
