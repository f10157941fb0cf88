"""A deployment's options: what the wizard pre-fills from the inventory and the catalogues, and how edits are
checked (every error keyed by its path, e.g. `options.versions.cuda`)."""

import re
from collections import Counter

from apps.deployments import catalogue
from apps.inventory.choices import FirmwareComponent, NicPurpose

# What a plan holds when neither the inventory nor an edit says otherwise: the one definition the wizard, the
# services (and so the API), the steps and the artefacts fill missing values from. The MTU end to end and the
# checkpoint interval are the brief's; defaults() fills the NCCL interfaces, the baselines and the tier from the
# inventory.
PLAN_DEFAULTS: dict[str, dict] = {
    "versions": {name: catalogue.newest(name) for name in catalogue.SOFTWARE},
    "baselines": {component: "" for component in FirmwareComponent},  # "": no baseline for that component
    "network": {"mtu": 9000, "rss_queues": 32, "rdma_priority": 3, "dscp": 26, "ecn": True},
    "nccl": {"socket_ifname": "", "ib_hca": "", "debug": "INFO"},
    "cgroup": {"slice": "training.slice", "system_cpus_per_socket": 2, "system_memory_gib": 32},
    "scheduler": {"scheduler_name": "rackpilot-gpu", "placement": "leaf", "idle_reclaim_minutes": 30},
    "checkpoints": {"every_steps": 1000, "mount": "/checkpoints", "tier": "hot", "keep_last": 3},
    "environment": {},
    # Phase 5 after the per-node phases: multi-node NCCL, the sweep, HPL-MxP (apps.deployments.cluster); defaults()
    # turns it on for two nodes or more, and it never runs on one.
    "acceptance": {"cluster": True},
}
SECTIONS = tuple(PLAN_DEFAULTS)
FIRMWARE_VERSION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,39}")
PATH = re.compile(r"/[A-Za-z0-9_./-]{0,200}")
SLICE = re.compile(r"[A-Za-z0-9_-]{1,60}\.slice")


def _most_common(values) -> str:
    counted = Counter(value for value in values if value)
    return counted.most_common(1)[0][0] if counted else ""


def defaults(nodes) -> dict:
    """Options pre-filled for these nodes: newest catalogue versions, the firmware most nodes run as baseline, the
    management NIC for NCCL's bootstrap socket, the RDMA NICs for NCCL_IB_HCA."""
    from apps.inventory.models import Firmware, Nic, Volume

    firmware = Firmware.objects.filter(node__in=nodes).values_list("component", "version")
    by_component: dict[str, list[str]] = {}
    for component, version in firmware:
        by_component.setdefault(component, []).append(version)
    nics = list(Nic.objects.filter(node__in=nodes).values_list("node_id", "name", "purpose", "rdma_capable"))
    management = _most_common(name for _, name, purpose, _ in nics if purpose == NicPurpose.MANAGEMENT)
    data = sorted({name for _, name, purpose, _ in nics if purpose == NicPurpose.DATA})
    rdma_per_node = Counter(node for node, _, purpose, rdma in nics if rdma and purpose == NicPurpose.DATA)
    rdma_count = max(rdma_per_node.values(), default=0)
    tier = _most_common(
        Volume.objects.filter(node__in=nodes, mount_point="/checkpoints").values_list("tier__kind", flat=True)
    )
    return merged(
        PLAN_DEFAULTS,
        {
            "baselines": {component: _most_common(by_component.get(component, [])) for component in FirmwareComponent},
            "nccl": {
                "socket_ifname": management or ",".join(data[:1]),
                "ib_hca": ",".join(f"mlx5_{index}" for index in range(rdma_count)),
            },
            "checkpoints": {"tier": tier} if tier else {},
            "acceptance": {"cluster": len(nodes) >= 2},
        },
    )


def _value(options: dict, section: str, name: str):
    return (options.get(section) or {}).get(name, PLAN_DEFAULTS[section][name])


def merged(base: dict, edits: dict) -> dict:
    result = {section: dict(base.get(section) or {}) for section in SECTIONS}
    for section, values in (edits or {}).items():
        if section == "environment" and isinstance(values, dict):
            result[section] = dict(values)  # the plan's own variables: edits give the whole set, so one can go
        elif section in result and isinstance(values, dict):
            result[section].update(values)
    return result


def errors(edits, *, merged_options: dict | None = None) -> dict[str, str]:
    """What is wrong with the options, each keyed by its path under `options`: the sections, versions outside the
    catalogue, baselines, and the values that become command arguments. Everything the generated files need is
    checked by artefacts.options_errors (services run both)."""
    if not isinstance(edits, dict):
        return {"options": "Options are an object with sections " + ", ".join(SECTIONS) + "."}
    problems: dict[str, str] = {}
    for section, values in edits.items():
        if section not in SECTIONS:
            problems[f"options.{section}"] = f"Unknown section; known: {', '.join(SECTIONS)}."
        elif not isinstance(values, dict):
            problems[f"options.{section}"] = "An object."
    if problems:
        return problems
    options = merged_options or edits
    for name, version in (options.get("versions") or {}).items():
        key = f"options.versions.{name}"
        if name not in catalogue.SOFTWARE:
            problems[key] = f"Unknown software; known: {', '.join(catalogue.SOFTWARE)}."
        elif version not in catalogue.SOFTWARE[name]:
            problems[key] = f"{version!r} is not in the catalogue; choose one of {', '.join(catalogue.SOFTWARE[name])}."
    if not problems:
        versions = options.get("versions") or {}
        problems.update({f"options.{k}": v for k, v in catalogue.compatibility_errors(versions).items()})
    for component, version in (options.get("baselines") or {}).items():
        key = f"options.baselines.{component}"
        if component not in FirmwareComponent.values:
            problems[key] = f"Unknown component; known: {', '.join(FirmwareComponent.values)}."
        elif version and not (isinstance(version, str) and FIRMWARE_VERSION.fullmatch(version)):
            problems[key] = "A firmware version: letters, digits, . _ - (up to 40)."
    # These two end up in commands (df on the mount, cat of the slice's unit file): the catalogue's path pattern.
    if not PATH.fullmatch(str(_value(options, "checkpoints", "mount"))):
        problems["options.checkpoints.mount"] = "An absolute path of letters, digits, _ . / -."
    for name, value in (edits.get("acceptance") or {}).items():
        if name != "cluster":
            problems[f"options.acceptance.{name}"] = "Unknown setting; known: cluster."
        elif not isinstance(value, bool):
            problems["options.acceptance.cluster"] = "true or false: run cluster acceptance after the per-node phases."
    if not SLICE.fullmatch(str(_value(options, "cgroup", "slice"))):
        problems["options.cgroup.slice"] = "A systemd slice name (letters, digits, _ -) ending in .slice."
    return problems
