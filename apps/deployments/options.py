"""A deployment's options: what the wizard pre-fills from the inventory and the catalogues, and how edits are
checked (every error keyed by its path, e.g. `options.versions.cuda`)."""

import re
from collections import Counter

from apps.deployments import catalogue
from apps.inventory.choices import FirmwareComponent, NicPurpose

SECTIONS = ("versions", "baselines", "network", "nccl", "cgroup", "scheduler", "checkpoints", "environment")
INTERFACE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:@-]{0,14}")
FIRMWARE_VERSION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,39}")
ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]{0,63}")
PATH = re.compile(r"/[A-Za-z0-9_./-]{0,200}")
SLICE = re.compile(r"[A-Za-z0-9_-]{1,60}\.slice")

# (section, name): (minimum, maximum) for whole numbers.
RANGES = {
    ("network", "mtu"): (1280, 9216),
    ("network", "rss_queues"): (1, 63),
    ("network", "rdma_priority"): (0, 7),
    ("network", "dscp"): (0, 63),
    ("cgroup", "system_cpus_per_socket"): (0, 64),
    ("cgroup", "system_memory_gib"): (0, 1024),
    ("scheduler", "idle_reclaim_minutes"): (1, 10080),
    ("checkpoints", "every_steps"): (1, 10_000_000),
    ("checkpoints", "keep_last"): (1, 1000),
}


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
    return {
        "versions": {name: catalogue.newest(name) for name in catalogue.SOFTWARE},
        "baselines": {component: _most_common(by_component.get(component, [])) for component in FirmwareComponent},
        "network": {"mtu": 9000, "rss_queues": 32, "rdma_priority": 3, "dscp": 26, "ecn": True},
        "nccl": {
            "socket_ifname": management or ",".join(data[:1]),
            "ib_hca": ",".join(f"mlx5_{index}" for index in range(rdma_count)),
            "debug": "INFO",
        },
        "cgroup": {"slice": "training.slice", "system_cpus_per_socket": 2, "system_memory_gib": 32},
        "scheduler": {"scheduler_name": "rackpilot-gpu", "placement": "leaf", "idle_reclaim_minutes": 30},
        "checkpoints": {"every_steps": 1000, "mount": "/checkpoints", "tier": tier or "hot", "keep_last": 3},
        "environment": {},
    }


def merged(base: dict, edits: dict) -> dict:
    result = {section: dict(base.get(section) or {}) for section in SECTIONS}
    for section, values in (edits or {}).items():
        if section == "environment" and isinstance(values, dict):
            result[section] = dict(values)  # the plan's own variables: edits give the whole set, so one can go
        elif section in result and isinstance(values, dict):
            result[section].update(values)
    return result


def errors(edits, *, merged_options: dict | None = None) -> dict[str, str]:
    """What is wrong with the options, each keyed by its path under `options`."""
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
    if not any(key.startswith("options.versions") for key in problems):
        problems.update(
            {f"options.{k}": v for k, v in catalogue.compatibility_errors(options.get("versions") or {}).items()}
        )
    for component, version in (options.get("baselines") or {}).items():
        key = f"options.baselines.{component}"
        if component not in FirmwareComponent.values:
            problems[key] = f"Unknown component; known: {', '.join(FirmwareComponent.values)}."
        elif version and not (isinstance(version, str) and FIRMWARE_VERSION.fullmatch(version)):
            problems[key] = "A firmware version: letters, digits, . _ - (up to 40)."
    for (section, name), (low, high) in RANGES.items():
        value = (options.get(section) or {}).get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high):
            problems[f"options.{section}.{name}"] = f"A whole number from {low} to {high}."
    nccl = options.get("nccl") or {}
    for name in ("socket_ifname", "ib_hca"):
        value = nccl.get(name, "")
        items = str(value).lstrip("^=").split(",") if value else []
        if not isinstance(value, str) or any(not INTERFACE.fullmatch(item) for item in items):
            problems[f"options.nccl.{name}"] = "Interface names separated by commas (optionally ^ or = first)."
    if nccl.get("debug", "INFO") not in ("VERSION", "WARN", "INFO", "TRACE"):
        problems["options.nccl.debug"] = "One of VERSION, WARN, INFO, TRACE."
    if not SLICE.fullmatch(str((options.get("cgroup") or {}).get("slice", "training.slice"))):
        problems["options.cgroup.slice"] = "A systemd slice name ending in .slice."
    if (options.get("scheduler") or {}).get("placement", "leaf") not in ("leaf", "numa"):
        problems["options.scheduler.placement"] = "leaf or numa."
    if not PATH.fullmatch(str((options.get("checkpoints") or {}).get("mount", "/checkpoints"))):
        problems["options.checkpoints.mount"] = "An absolute path of letters, digits, _ . / -."
    for name, value in (options.get("environment") or {}).items():
        if not ENV_NAME.fullmatch(name):
            problems[f"options.environment.{name}"] = "Variable names are capitals, digits and _."
        elif not isinstance(value, str) or "\n" in value or "\x00" in value:
            problems[f"options.environment.{name}"] = "A one-line string."
    return problems
