"""The document's sections: which model each holds, the fields naming each object (its natural key), its columns
and the references between sections. Export, reading and applying all work from SECTIONS."""

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import PurePath

from django.db import models

from apps.core.text import echo
from apps.inventory.models import (
    Cable,
    CoolantLoop,
    Firmware,
    Gpu,
    GpuSku,
    LeakSensor,
    Nic,
    Node,
    NvlinkDomain,
    NvlinkSwitchTray,
    Pdu,
    PowerShelf,
    Rack,
    Site,
    SshHostKey,
    StorageTier,
    Switch,
    Tag,
    Volume,
)

DOCUMENT_VERSION = 1
DOCUMENT_FORMATS = ("json", "yaml")
IMPORT_FORMATS = ("json", "yaml", "csv")
NODE_CSV_COLUMNS = (
    "hostname", "role", "status", "site", "rack", "u_position", "u_height", "management_ip", "bmc_address", "gpu_sku",
    "expected_gpu_count", "cpu_model", "cpu_sockets", "cpu_cores", "memory_gib", "numa_nodes", "tags",
)  # fmt: skip
CSV_TAG_SEPARATOR = ";"

_EXTENSIONS = {".json": "json", ".yaml": "yaml", ".yml": "yaml", ".csv": "csv"}


def guess_format(filename: str) -> str | None:
    """The import format a file name implies (`racks.yml` -> "yaml"), or None."""
    return _EXTENSIONS.get(PurePath(filename).suffix.lower())


@dataclass(frozen=True)
class Ref:
    """A document field naming another object by its natural key: `target` section, model `attr`, values() paths."""

    target: str
    attr: str
    paths: tuple[str, ...]


# An export from before GPU health came from health events names `health`; what it said of presence is kept.
PRESENCE_OF_OLD_HEALTH = {"missing": "missing", "unknown": "unknown"}  # any other health said the GPU was there


def _gpu_presence_from_health(row: dict) -> dict:
    """A GPU row with `health` (an older export) as one with `presence`; its health is derived again on import."""
    if "health" not in row or "presence" in row:
        return row
    presence = PRESENCE_OF_OLD_HEALTH.get(str(row["health"]), "present")
    return {**{name: value for name, value in row.items() if name != "health"}, "presence": presence}


@dataclass(frozen=True)
class Section:
    """One list of the document: its model, the fields naming each object (`key`), and all its fields."""

    name: str
    model: type[models.Model]
    key: tuple[str, ...]
    columns: tuple[str, ...]
    refs: dict[str, Ref] = field(default_factory=dict)
    related: tuple[str, ...] = ()  # loaded with existing objects, for clean() and __str__()
    upgrade: Callable[[dict], dict] | None = None  # how a row of an older export reads now

    @cached_property
    def plain(self) -> list[str]:
        return [name for name in self.columns if name not in self.refs and name not in SPECIAL_COLUMNS]

    @cached_property
    def attnames(self) -> tuple[str, ...]:
        """The model's attnames the document sets: plain fields, foreign keys' ids, cable ends."""
        names = [*self.plain, *(self.model._meta.get_field(ref.attr).attname for ref in self.refs.values())]
        if self.name == "cables":
            names += [f"{side}_{part}" for side in "ab" for part in ("nic_id", "switch_id", "port")]
        return tuple(names)

    @cached_property
    def key_paths(self) -> tuple[str, ...]:
        """values() paths of the natural key, which is also the export's order."""
        if self.name == "cables":
            return ()
        return tuple(path for name in self.key for path in (self.refs[name].paths if name in self.refs else (name,)))

    def column_of(self, model_field: str) -> str | None:
        """The document field a model field's error belongs to."""
        if model_field == "__all__":
            return None
        if self.name == "cables" and model_field[:2] in ("a_", "b_"):
            return model_field[0]
        return model_field


# Columns with their own handling: many-to-many sets and cable ends.
SPECIAL_COLUMNS = {"tags", "peer_gpus", "a", "b"}


def reference(target: str, attr: str, *paths: str) -> Ref:
    return Ref(target, attr, paths)


SITE = reference("sites", "site", "site__slug")
NODE = reference("nodes", "node", "node__hostname")
RACK = reference("racks", "rack", "rack__site__slug", "rack__name")
DOMAIN = reference("nvlink_domains", "domain", "domain__name")


SECTIONS: tuple[Section, ...] = (
    Section("sites", Site, key=("slug",), columns=("slug", "name", "description")),
    Section(
        "racks", Rack, key=("site", "name"), refs={"site": SITE}, related=("site",),
        columns=("site", "name", "row", "position", "u_height", "power_budget_kw"),
    ),
    Section("tags", Tag, key=("slug",), columns=("slug", "name", "colour")),
    Section(
        "gpu_skus", GpuSku, key=("name",),
        columns=("name", "vendor", "architecture", "form_factor", "hbm_gib", "mem_bandwidth_tb_per_s",
                 "mem_bandwidth_reference_tb_per_s", "nvlink_gb_per_s", "tdp_w", "bf16_dense_tflops",
                 "fp8_dense_tflops", "pcie_gen"),
    ),
    # Rack-scale systems: the domain before its compute trays (nodes) and switch trays.
    Section(
        "nvlink_domains", NvlinkDomain, key=("name",), refs={"rack": RACK}, related=("rack",),
        columns=("name", "rack", "system", "cluster_uuid"),
    ),
    Section(
        "nodes", Node, key=("hostname",), related=("rack", "nvlink_domain__rack"),
        refs={"rack": RACK, "gpu_sku": reference("gpu_skus", "gpu_sku", "gpu_sku__name"),
              "nvlink_domain": reference("nvlink_domains", "nvlink_domain", "nvlink_domain__name")},
        columns=("hostname", "role", "status", "rack", "u_position", "u_height", "management_ip", "ssh_port",
                 "bmc_address", "gpu_sku", "expected_gpu_count", "cpu_model", "cpu_sockets", "cpu_cores",
                 "memory_gib", "numa_nodes", "transport", "nvlink_domain", "tray_slot", "tags", "comments"),
    ),
    Section(
        "switch_trays", NvlinkSwitchTray, key=("name",), refs={"domain": DOMAIN}, related=("domain__rack",),
        columns=("name", "domain", "slot", "serial", "bmc_address", "position", "u_height"),
    ),
    Section(
        "power_shelves", PowerShelf, key=("name",), refs={"rack": RACK}, related=("rack",),
        columns=("name", "rack", "psu_count", "capacity_w", "bmc_address", "position", "u_height"),
    ),
    Section(
        "coolant_loops", CoolantLoop, key=("name",), refs={"rack": RACK}, related=("rack",),
        columns=("name", "rack", "kind", "design_flow_lpm", "max_supply_c", "max_return_c", "max_pressure_kpa"),
    ),
    Section(
        "leak_sensors", LeakSensor, key=("name",), related=("loop", "node", "switch_tray__domain"),
        refs={"loop": reference("coolant_loops", "loop", "loop__name"), "node": NODE,
              "switch_tray": reference("switch_trays", "switch_tray", "switch_tray__name")},
        columns=("name", "loop", "node", "switch_tray"),
    ),
    Section(
        "gpus", Gpu, key=("node", "index"), related=("node",),
        refs={"node": NODE, "sku": reference("gpu_skus", "sku", "sku__name")},
        columns=("node", "index", "sku", "uuid", "serial", "pci_bus_id", "numa_node", "pcie_switch", "presence"),
        upgrade=_gpu_presence_from_health,
    ),
    Section(
        "nics", Nic, key=("node", "name"), related=("node",), refs={"node": NODE},
        columns=("node", "name", "mac", "purpose", "speed_gbps", "mtu", "rdma_capable", "transport", "plane",
                 "pfc_priorities", "ecn_enabled", "numa_node", "pci_address", "pcie_switch", "link_up", "peer_gpus"),
    ),
    Section(
        "switches", Switch, key=("name",), refs={"site": SITE, "rack": RACK}, related=("rack",),
        columns=("name", "site", "rack", "plane", "tier", "model", "port_count", "port_speed_gbps", "management_ip",
                 "position", "u_height", "face"),
    ),
    Section(
        "pdus", Pdu, key=("name",), refs={"rack": RACK}, related=("rack",),
        columns=("name", "rack", "model", "feed", "max_power_w", "rated_amps", "rated_volts", "outlet_count",
                 "position", "u_height", "face", "side"),
    ),
    Section(
        "cables", Cable, key=("a",), related=("a_nic__node", "a_switch", "b_nic__node", "b_switch"),
        columns=("a", "b", "speed_gbps", "medium", "plane", "label"),
    ),
    Section(
        "storage_tiers", StorageTier, key=("site", "name"), refs={"site": SITE}, related=("site",),
        columns=("site", "name", "kind", "medium", "bandwidth_gb_per_s", "required_bandwidth_gb_per_s", "capacity_tb"),
    ),
    Section(
        "volumes", Volume, key=("node", "mount_point"), related=("node",),
        refs={"node": NODE, "tier": reference("storage_tiers", "tier", "tier__site__slug", "tier__name")},
        columns=("node", "mount_point", "tier", "capacity_gb"),
    ),
    Section(
        "firmware", Firmware, key=("node", "component", "target"), refs={"node": NODE}, related=("node",),
        columns=("node", "component", "target", "version"),
    ),
    Section(
        "host_keys", SshHostKey, key=("node", "fingerprint"), related=("node",),
        refs={"node": NODE, "approved_by": reference("users", "approved_by", "approved_by__username")},
        columns=("node", "fingerprint", "public_key", "state", "approved_by"),
    ),
)  # fmt: skip
SECTIONS_BY_NAME = {section.name: section for section in SECTIONS}
SECTION_NAMES = tuple(SECTIONS_BY_NAME)
# Sections whose objects other rows point foreign keys at (cable ends included).
FOREIGN_KEY_TARGETS = {ref.target for section in SECTIONS for ref in section.refs.values()} | {"nics", "switches"}

# Targets whose natural key is one text value, and what a person calls them.
SCALAR_TARGETS = {"sites": "site", "tags": "tag", "gpu_skus": "GPU SKU", "nodes": "node", "switches": "switch",
                  "pdus": "PDU", "users": "user", "nvlink_domains": "NVLink domain", "switch_trays": "switch tray",
                  "coolant_loops": "coolant loop"}  # fmt: skip
PAIR_TARGETS = {"racks": "rack", "storage_tiers": "storage tier"}


def describe(target: str, key: tuple) -> str:
    if target in PAIR_TARGETS:
        return f"{PAIR_TARGETS[target]} {echo(key[1])} in site {echo(key[0])}"
    if target == "gpus":
        return f"GPU {echo(key[1])} of node {echo(key[0])}"
    if target == "nics":
        return f"NIC {echo(key[1])} of node {echo(key[0])}"
    return f"{SCALAR_TARGETS[target]} {echo(key[0])}"


def end_paths(side: str) -> tuple[str, ...]:
    return (f"{side}_nic__node__hostname", f"{side}_nic__name", f"{side}_switch__name", f"{side}_port")


def end_value(hostname: str | None, nic: str | None, switch: str | None, port: str) -> dict:
    return {"node": hostname, "nic": nic} if nic is not None else {"switch": switch, "port": port}
