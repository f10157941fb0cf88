"""Compare what a node reported with what the inventory holds, and apply a decided difference to the inventory.

`compare()` reads the inventory only; it returns findings. A finding with `fill` set is a fact the inventory does not
hold yet (empty UUID, no firmware row): the caller writes it in directly. `apply()` makes the inventory say what was
discovered, through each model's save() so the audit log records the change (and full_clean() first, so it refuses
what a form would refuse).
"""

from collections import Counter
from dataclasses import dataclass, field

from django.core.exceptions import ValidationError

from apps.core import audit
from apps.core.choices import AuditAction
from apps.core.text import counted
from apps.discovery.choices import FactFamily, ObjectType
from apps.discovery.facts import pci_key
from apps.inventory.choices import FirmwareComponent, GpuPresence, StorageTierKind
from apps.inventory.models import Firmware, Gpu, Nic, Node

MEMORY_TOLERANCE = 0.05  # installed vs what the kernel reports (firmware and the kernel keep some)
CAPACITY_TOLERANCE = 0.05
NOT_RECORDED = "Nothing in the inventory records this: accepting acknowledges it."


@dataclass
class Finding:
    object_type: str
    object_key: str
    field: str
    expected: str
    discovered: str
    note: str = ""
    fill: bool = False


@dataclass
class Comparison:
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    could_not_run: dict[str, str] = field(default_factory=dict)
    summary: dict = field(default_factory=dict)

    def differ(self, object_type, key, name, expected, discovered, note="") -> None:
        self.findings.append(Finding(object_type, key, name, _text(expected), _text(discovered), note))

    def fill(self, object_type, key, name, discovered, note="") -> None:
        self.findings.append(Finding(object_type, key, name, "", _text(discovered), note, fill=True))


def _text(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "up" if value else "down"
    if isinstance(value, list | tuple):
        return ",".join(str(item) for item in value) or "none"
    return str(value)


def _gpu_list(indexes) -> str:
    return ",".join(f"GPU{index}" for index in sorted(indexes)) or "none"


def compare(node: Node, node_facts: dict, nic_facts: dict[str, dict[str, dict]], could_not_run: dict[str, str]):
    """node_facts: family → facts; nic_facts: family → interface → facts (only what was read)."""
    result = Comparison(could_not_run=dict(could_not_run))
    gpus = list(node.gpus.all())
    nics = {nic.name: nic for nic in node.nics.all()}
    firmware = {(fw.component, fw.target): fw.version for fw in node.firmware.all()}
    matched = _compare_gpus(result, node, gpus, node_facts.get(FactFamily.GPUS), node_facts.get(FactFamily.TOPOLOGY))
    _compare_nics(result, nics, node_facts.get(FactFamily.LINKS), nic_facts)
    _compare_firmware(result, node, firmware, node_facts, matched, nic_facts.get(FactFamily.NIC_FIRMWARE, {}))
    _compare_node(result, node, node_facts.get(FactFamily.CPU), node_facts.get(FactFamily.NUMA))
    _compare_volumes(result, node, node_facts.get(FactFamily.DISKS))
    _compare_affinity(result, nics, matched, node_facts.get(FactFamily.TOPOLOGY), nic_facts)
    return result


# --- GPUs -------------------------------------------------------------------------------------------------------


def _compare_gpus(result: Comparison, node: Node, gpus: list[Gpu], facts: dict | None, topo: dict | None):
    """Match discovered GPUs to inventory rows (UUID, then PCI bus id, then index); returns visible index → Gpu."""
    if facts is None:
        return {}
    by_uuid = {gpu.uuid.lower(): gpu for gpu in gpus if gpu.uuid}
    by_pci = {pci_key(gpu.pci_bus_id): gpu for gpu in gpus if gpu.pci_bus_id}
    by_index = {gpu.index: gpu for gpu in gpus}
    numa = {}
    for row in (topo or {}).get("gpus", []):
        if row["name"].startswith("GPU") and row["name"][3:].isdigit():
            numa[int(row["name"][3:])] = row["numa_affinity"]
    matched: dict[int, Gpu] = {}
    unmatched = []
    taken: set[int] = set()
    for seen in facts["gpus"]:
        gpu = by_uuid.get((seen["uuid"] or "").lower()) or by_pci.get(pci_key(seen["pci_bus_id"]))
        if gpu is None:
            candidate = by_index.get(seen["index"])
            if candidate is not None and not candidate.uuid and not candidate.pci_bus_id:
                gpu = candidate
        if gpu is None or gpu.pk in taken:
            unmatched.append(seen)
            continue
        taken.add(gpu.pk)
        matched[seen["index"]] = gpu
        key = f"GPU{gpu.index}"
        for name, value in (
            ("uuid", seen["uuid"]),
            ("serial", seen["serial"]),
            ("pci_bus_id", seen["pci_bus_id"]),
            ("numa_node", numa.get(seen["index"])),
        ):
            if value in (None, ""):
                continue
            current = getattr(gpu, name)
            if current in (None, ""):
                result.fill(ObjectType.GPU, key, name, value)
            elif (pci_key(current) != pci_key(value)) if name == "pci_bus_id" else (str(current) != str(value)):
                result.differ(ObjectType.GPU, key, name, current, value)
        if gpu.presence == GpuPresence.MISSING:
            result.differ(
                ObjectType.GPU,
                key,
                "present",
                "missing",
                "present",
                "The inventory marks this GPU missing; accepting marks it present again (healthy unless an open "
                "health event says otherwise).",
            )
    for gpu in gpus:
        if gpu.pk not in taken and gpu.presence != GpuPresence.MISSING:
            result.differ(
                ObjectType.GPU,
                f"GPU{gpu.index}",
                "present",
                "present",
                "missing",
                f"Not reported by nvidia-smi (UUID {gpu.uuid or '?'}, PCI {gpu.pci_bus_id or '?'}): fallen "
                "off the bus (XID 79) or not seated. Accepting marks it missing.",
            )
    free = sorted(set(range(16)) - {gpu.index for gpu in gpus})
    for seen in unmatched:
        if node.gpu_sku_id and not gpus and seen["index"] in free and seen["uuid"]:
            result.fill(
                ObjectType.GPU,
                seen["uuid"],
                "present",
                seen["pci_bus_id"] or "present",
                f"Added as GPU{seen['index']} ({seen['name']}).",
            )
        else:
            result.differ(
                ObjectType.GPU,
                seen["uuid"] or pci_key(seen["pci_bus_id"]),
                "present",
                "absent",
                seen["pci_bus_id"] or "present",
                f"nvidia-smi reports {seen['name']} (serial {seen['serial'] or '?'}) that the inventory "
                "does not list. " + ("Accepting adds it." if node.gpu_sku_id else NOT_RECORDED),
            )
    expected = node.expected_gpu_count or len(gpus)
    result.summary["gpus"] = {"expected": expected, "discovered": facts["count"]}
    if facts["count"] != expected:
        result.notes.append(f"{facts['count']} of {expected} expected GPUs reported by nvidia-smi.")
    return matched


# --- NICs -------------------------------------------------------------------------------------------------------


def _compare_nics(result: Comparison, nics: dict[str, Nic], links: dict | None, nic_facts: dict) -> None:
    speeds = nic_facts.get(FactFamily.SPEED, {})
    qos = nic_facts.get(FactFamily.QOS, {})
    seen = {link["name"]: link for link in (links or {}).get("interfaces", [])}
    for name, nic in sorted(nics.items()):
        link = seen.get(name)
        if links is not None:
            if link is None:
                result.differ(
                    ObjectType.NIC,
                    name,
                    "present",
                    "present",
                    "absent",
                    f"ip link lists no {name}: renamed, or the card is not detected. " + NOT_RECORDED,
                )
                continue
            if link["mtu"] is not None and link["mtu"] != nic.mtu:
                note = (
                    "RoCE needs MTU 9000 end to end; NCCL timeouts follow a smaller MTU."
                    if nic.mtu > link["mtu"]
                    else ""
                )
                result.differ(ObjectType.NIC, name, "mtu", nic.mtu, link["mtu"], note)
            if link["carrier"] != nic.link_up:
                result.differ(
                    ObjectType.NIC, name, "link_up", nic.link_up, link["carrier"], f"operstate {link['state'] or '?'}"
                )
            if link["address"] and link["link_type"] == "ether":
                if not nic.mac:
                    result.fill(ObjectType.NIC, name, "mac", link["address"])
                elif nic.mac.lower() != link["address"].lower():
                    result.differ(ObjectType.NIC, name, "mac", nic.mac, link["address"].lower())
        speed = speeds.get(name)
        if speed and speed["link_detected"] and speed["speed_mbps"]:
            gbps = speed["speed_mbps"] // 1000
            if gbps != nic.speed_gbps:
                result.differ(
                    ObjectType.NIC,
                    name,
                    "speed_gbps",
                    nic.speed_gbps,
                    gbps,
                    "Link trained below the port's speed (cable, transceiver or switch port)."
                    if gbps < nic.speed_gbps
                    else "",
                )
        if name in qos:
            found = sorted(qos[name]["pfc_priorities"])
            if found != sorted(nic.pfc_priorities or []):
                result.differ(
                    ObjectType.NIC,
                    name,
                    "pfc_priorities",
                    sorted(nic.pfc_priorities or []),
                    found,
                    "Lossless RoCE needs PFC on the RDMA priority." if not found else "",
                )


# --- firmware ---------------------------------------------------------------------------------------------------


def _compare_firmware(result, node, firmware, node_facts, matched: dict[int, Gpu], nic_firmware: dict) -> None:
    found: list[tuple[str, str, str]] = []  # (component, target, version)
    bios = node_facts.get(FactFamily.BIOS)
    if bios:
        found.append((FirmwareComponent.BIOS, "", bios["version"]))
    for visible, seen in {g["index"]: g for g in (node_facts.get(FactFamily.GPUS) or {}).get("gpus", [])}.items():
        gpu = matched.get(visible)
        if gpu is not None and seen["vbios_version"]:
            found.append((FirmwareComponent.GPU_VBIOS, f"GPU{gpu.index}", seen["vbios_version"]))
    for interface, facts in sorted(nic_firmware.items()):
        if facts["firmware_version"]:
            found.append((FirmwareComponent.NIC_FIRMWARE, interface, facts["firmware_version"]))
    for component, target, version in found:
        key = target or str(component)
        current = firmware.get((component, target))
        if current is None:
            result.fill(ObjectType.FIRMWARE, key, "version", version, f"{FirmwareComponent(component).label}")
        elif current != version:
            result.differ(
                ObjectType.FIRMWARE,
                key,
                "version",
                current,
                version,
                f"{FirmwareComponent(component).label} differs from the inventory.",
            )
    if bios:
        _bios_drift(result, node, bios["version"])


def _bios_drift(result: Comparison, node: Node, version: str) -> None:
    """The inventory may agree with a node that lags its fleet: say so (a note, not a difference)."""
    versions = Counter(
        Firmware.objects.filter(component=FirmwareComponent.BIOS, target="", node__role=node.role)
        .exclude(node=node)
        .values_list("version", flat=True)
    )
    if not versions:
        return
    baseline, count = versions.most_common(1)[0]
    if baseline != version and count > sum(versions.values()) / 2:
        result.notes.append(
            f"BIOS {version} drifts from the fleet: {count} of {sum(versions.values())} other {node.role} nodes run "
            f"{baseline}. Align firmware before acceptance."
        )
        result.summary["bios_drift"] = {"node": version, "fleet": baseline}


# --- CPU, memory, NUMA, volumes ---------------------------------------------------------------------------------


def _compare_node(result: Comparison, node: Node, cpu: dict | None, numa: dict | None) -> None:
    key = ""
    if cpu:
        for name, value in (("cpu_model", cpu["model"]), ("cpu_sockets", cpu["sockets"]), ("cpu_cores", cpu["cores"])):
            if value in (None, ""):
                continue
            current = getattr(node, name)
            if current in ("", 0):
                result.fill(ObjectType.NODE, key, name, value)
            elif str(current) != str(value):
                result.differ(ObjectType.NODE, key, name, current, value)
    if numa:
        if numa["count"] and numa["count"] != node.numa_nodes:
            result.differ(ObjectType.NODE, key, "numa_nodes", node.numa_nodes, numa["count"])
        if numa["memory_mb"]:
            gib = round(numa["memory_mb"] / 1024)
            if not node.memory_gib:
                result.fill(ObjectType.NODE, key, "memory_gib", gib)
            elif abs(gib - node.memory_gib) > node.memory_gib * MEMORY_TOLERANCE:
                result.differ(
                    ObjectType.NODE,
                    key,
                    "memory_gib",
                    node.memory_gib,
                    gib,
                    "More than 5% away from the installed memory: a DIMM missing or disabled?",
                )


def _compare_volumes(result: Comparison, node: Node, disks: dict | None) -> None:
    if disks is None:
        return
    mounted = {}
    for device in disks["devices"]:
        for mount in device["mountpoints"]:
            mounted[mount] = device
    for volume in node.volumes.all():
        device = mounted.get(volume.mount_point)
        if device is None:
            if volume.tier.kind == StorageTierKind.HOT:  # local NVMe; warm and cold are network file systems
                result.differ(
                    ObjectType.VOLUME,
                    volume.mount_point,
                    "mounted",
                    "yes",
                    "no",
                    "The local hot tier is not mounted. " + NOT_RECORDED,
                )
            continue
        if device["size_bytes"]:
            gb = round(device["size_bytes"] / 1e9)
            if abs(gb - volume.capacity_gb) > volume.capacity_gb * CAPACITY_TOLERANCE:
                result.differ(
                    ObjectType.VOLUME,
                    volume.mount_point,
                    "capacity_gb",
                    volume.capacity_gb,
                    gb,
                    f"{device['name']} ({device['type']})",
                )


# --- GPU <-> NIC affinity -------------------------------------------------------------------------------------


def _compare_affinity(result: Comparison, nics: dict[str, Nic], matched: dict[int, Gpu], topo, nic_facts) -> None:
    """NICs at PIX/PXB from a GPU share its PCIe switch. topo -m names RDMA devices (mlx5_N); they are numbered in
    PCI order, so the N-th mlx5 interface by PCI address (from ethtool -i) is mlx5_N."""
    if topo is None or not topo["nics"]:
        return
    if not matched:
        result.could_not_run["affinity"] = "needs the GPU list (nvidia-smi --query-gpu) to name topo -m's GPUs"
        return
    drivers = nic_facts.get(FactFamily.NIC_FIRMWARE, {})
    mlx = sorted((pci_key(f["bus_info"]), name) for name, f in drivers.items() if f["driver"] == "mlx5_core")
    if len(mlx) != len(topo["nics"]):
        result.could_not_run["affinity"] = (
            f"topo -m shows {counted(len(topo['nics']), 'NIC')} but ethtool -i named "
            f"{counted(len(mlx), 'mlx5 interface')}: "
            "cannot tell which NIC is which"
        )
        return
    by_device = {f"mlx5_{number}": name for number, (_, name) in enumerate(mlx)}
    affinity = {}
    for row in topo["nics"]:
        interface = by_device.get(row["device"] or "") or by_device.get(f"mlx5_{row['name'][3:]}")
        if interface is None:
            continue
        peers = set()
        for column, link in row["links"].items():
            if link in ("PIX", "PXB") and column.startswith("GPU") and column[3:].isdigit():
                gpu = matched.get(int(column[3:]))
                if gpu is not None:
                    peers.add(gpu.index)
        affinity[interface] = sorted(peers)
        nic = nics.get(interface)
        if nic is None:
            continue
        expected = sorted(gpu.index for gpu in nic.peer_gpus.all())
        # A GPU nvidia-smi did not report (a missing-GPU difference of its own) keeps its place among the peers.
        seen_indexes = {gpu.index for gpu in matched.values()}
        peers |= {index for index in expected if index not in seen_indexes}
        if sorted(peers) != expected:
            key = "fill" if not expected else "differ"
            if key == "fill":
                result.fill(ObjectType.NIC, interface, "peer_gpus", _gpu_list(peers), "GPUs on the NIC's PCIe switch")
            else:
                result.differ(
                    ObjectType.NIC,
                    interface,
                    "peer_gpus",
                    _gpu_list(expected),
                    _gpu_list(peers),
                    "GPUs on the NIC's PCIe switch (PIX/PXB in topo -m) differ from the inventory.",
                )
    result.summary["affinity"] = {name: _gpu_list(peers) for name, peers in sorted(affinity.items())}


# --- applying a finding -----------------------------------------------------------------------------------------


class NotApplicable(Exception):
    """The inventory has no field for this finding: accepting only acknowledges it."""


def _int(value: str) -> int:
    return int(value)


def _gpu_indexes(value: str) -> list[int]:
    return [] if value in ("", "none") else [int(item.removeprefix("GPU")) for item in value.split(",")]


def _priorities(value: str) -> list[int]:
    return [] if value in ("", "none") else [int(item) for item in value.split(",")]


GPU_FIELDS = {"uuid": str, "serial": str, "pci_bus_id": str, "numa_node": _int}
NIC_FIELDS = {
    "mtu": _int,
    "speed_gbps": _int,
    "link_up": lambda v: v == "up",
    "mac": str,
    "pfc_priorities": _priorities,
}
NODE_FIELDS = {"cpu_model": str, "cpu_sockets": _int, "cpu_cores": _int, "memory_gib": _int, "numa_nodes": _int}


def _save(obj, changes: dict) -> None:
    for name, value in changes.items():
        setattr(obj, name, value)
    obj.full_clean()
    obj.save()


def apply(node: Node, object_type: str, object_key: str, field_name: str, value: str) -> None:
    """Make the inventory say `value` for this fact. Raises ValidationError (refused) or NotApplicable."""
    if object_type == ObjectType.GPU:
        if field_name == "present":
            _apply_gpu_presence(node, object_key, value)
        elif field_name in GPU_FIELDS:
            gpu = Gpu.objects.get(node=node, index=int(object_key.removeprefix("GPU")))
            _save(gpu, {field_name: GPU_FIELDS[field_name](value) if value else None})
        else:
            raise NotApplicable(field_name)
    elif object_type == ObjectType.NIC:
        if field_name == "present":
            raise NotApplicable(field_name)
        nic = Nic.objects.get(node=node, name=object_key)
        if field_name == "peer_gpus":
            _apply_peers(nic, _gpu_indexes(value))
        elif field_name in NIC_FIELDS:
            _save(nic, {field_name: NIC_FIELDS[field_name](value)})
        else:
            raise NotApplicable(field_name)
    elif object_type == ObjectType.FIRMWARE:
        if object_key == FirmwareComponent.BIOS:
            component, target = FirmwareComponent.BIOS, ""
        elif object_key.startswith("GPU"):
            component, target = FirmwareComponent.GPU_VBIOS, object_key
        else:
            component, target = FirmwareComponent.NIC_FIRMWARE, object_key
        row = Firmware.objects.filter(node=node, component=component, target=target).first()
        _save(row or Firmware(node=node, component=component, target=target), {"version": value})
    elif object_type == ObjectType.NODE and field_name in NODE_FIELDS:
        node = Node.objects.get(pk=node.pk)
        _save(node, {field_name: NODE_FIELDS[field_name](value)})
    elif object_type == ObjectType.VOLUME and field_name == "capacity_gb":
        volume = node.volumes.get(mount_point=object_key)
        _save(volume, {"capacity_gb": int(value)})
    else:
        raise NotApplicable(field_name)


def _apply_gpu_presence(node: Node, object_key: str, value: str) -> None:
    if object_key.startswith("GPU") and object_key[3:].isdigit():
        gpu = Gpu.objects.get(node=node, index=int(object_key[3:]))
        # Presence only: apps/health derives the health from it and the GPU's open events (an XID stays failed).
        _save(gpu, {"presence": GpuPresence.MISSING if value == "missing" else GpuPresence.PRESENT})
        return
    # A GPU the inventory does not list (the key is its UUID): add it with the node's SKU at the first free index.
    if node.gpu_sku_id is None:
        raise NotApplicable("present")
    used = set(Gpu.objects.filter(node=node).values_list("index", flat=True))
    index = min(set(range(16)) - used)
    gpu = Gpu(
        node=node,
        index=index,
        sku_id=node.gpu_sku_id,
        presence=GpuPresence.PRESENT,
        uuid=object_key if object_key.startswith("GPU-") else None,
        pci_bus_id=value if value not in ("", "present") else "",
    )
    _save(gpu, {})


def _apply_peers(nic: Nic, indexes: list[int]) -> None:
    """peer_gpus is many-to-many (save() does not audit it): write the audit entry here."""
    before = sorted(gpu.index for gpu in nic.peer_gpus.all())
    gpus = list(Gpu.objects.filter(node=nic.node_id, index__in=indexes))
    if len(gpus) != len(set(indexes)):
        raise ValidationError({"peer_gpus": "A GPU named here is not in the inventory."})
    nic.peer_gpus.set(gpus)
    audit.record(
        AuditAction.UPDATE,
        obj=nic,
        object_repr=str(nic),
        changes={"peer_gpus": [_gpu_list(before), _gpu_list(indexes)]},
    )
