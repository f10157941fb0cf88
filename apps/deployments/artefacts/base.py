"""What every artefact shares: the Artefact record, its error, the options it is rendered from (defaults and
checks, keyed by path), and small YAML and text helpers."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

SCHEMA_DIR = Path(__file__).resolve().parent / "schemas"


ARTEFACT_NAMES: tuple[str, ...] = (
    "nccl-conf",
    "environment",
    "cgroup-slice",
    "kube-scheduler",
    "pod-affinity",
    "node-labels",
    "idle-reclaim",
    "checkpoints",
)


YAML_MEDIA_TYPE = "application/yaml"


TEXT_MEDIA_TYPE = "text/plain"


SHELL_MEDIA_TYPE = "text/x-shellscript"


DEFAULT_OPTIONS: dict[str, dict[str, Any]] = {
    "versions": {
        "driver": "580.159.04",
        "cuda": "13.0",
        "nccl": "2.28.3",
        "openmpi": "4.1.6",
        "pytorch": "2.9.0",
        "tensorflow": "2.19.0",
    },
    "network": {"mtu": 9000, "rss_queues": 32, "rdma_priority": 3, "dscp": 26, "ecn": True},
    "nccl": {"socket_ifname": "", "ib_hca": "", "debug": "INFO"},
    "cgroup": {"slice": "training.slice", "system_cpus_per_socket": 2, "system_memory_gib": 32},
    "scheduler": {"scheduler_name": "rackpilot-gpu", "placement": "leaf", "idle_reclaim_minutes": 30},
    "checkpoints": {"every_steps": 1000, "mount": "/checkpoints", "tier": "hot", "keep_last": 3},
    "environment": {},
}


LEAF_LABEL = "rackpilot.io/leaf"


RACK_LABEL = "rackpilot.io/rack"


NUMA_LABEL = "rackpilot.io/numa-aligned"


GPU_COUNT_LABEL = "nvidia.com/gpu.count"


DEPLOYMENT_LABEL = "rackpilot.io/deployment"


ROLE_LABEL = "rackpilot.io/role"


GPU_RESOURCE = "nvidia.com/gpu"


PLACEMENTS = ("leaf", "numa")


NCCL_DEBUG_LEVELS = ("VERSION", "WARN", "INFO", "TRACE")


CHECKPOINT_FORMAT = "torch.distributed.checkpoint"


IFNAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,14}\Z")


ENV_NAME_RE = re.compile(r"^[A-Z_][A-Z0-9_]*\Z")


VERSION_RE = re.compile(r"^[0-9]+(\.[0-9]+)*\Z")


DNS_LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z")


DNS_SUBDOMAIN_RE = re.compile(r"^(?=.{1,253}\Z)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")


LABEL_NAME_RE = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]\Z")


LABEL_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?\Z")


SLICE_RE = re.compile(r"^[A-Za-z0-9:_.\\-]{1,249}\.slice\Z")


TOKEN_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}\Z")


RESERVED_ENV_NAMES = frozenset({"CUDA_HOME", "PATH", "LD_LIBRARY_PATH", "TF_XLA_FLAGS", "NCCL_DEBUG"})


@dataclass(frozen=True)
class Artefact:
    """One generated file: ``filename`` is where it belongs on the node or in the cluster."""

    name: str
    filename: str
    media_type: str
    content: str
    description: str


class ArtefactError(ValueError):
    """An artefact (or the options it needs) failed validation; ``name`` says which one."""

    def __init__(self, name: str, message: str, *, errors: dict[str, str] | None = None):
        super().__init__(f"{name}: {message}")
        self.name = name
        self.message = message
        self.errors = errors or {}


def with_defaults(options: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """Return a copy of ``options`` with every missing section and key filled from :data:`DEFAULT_OPTIONS`."""
    options = options or {}
    merged: dict[str, dict[str, Any]] = {}
    for section, defaults in DEFAULT_OPTIONS.items():
        given = options.get(section)
        merged[section] = {**defaults, **given} if isinstance(given, dict) else dict(defaults)
    for key, value in options.items():
        merged.setdefault(key, value)
    return merged


def int_error(value: Any, low: int, high: int | None) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return "must be a whole number"
    if value < low or (high is not None and value > high):
        return f"must be between {low} and {high}" if high is not None else f"must be at least {low}"
    return None


def list_errors(value: Any) -> str | None:
    if not isinstance(value, str):
        return "must be a comma-separated string of interface names"
    if not value:
        return None
    for item in value.split(","):
        if not IFNAME_RE.match(item):
            return f"{item!r} is not a valid interface name (letters, digits, _ . : @ -, at most 15 characters)"
    return None


def text_error(value: Any) -> str | None:
    if not isinstance(value, str):
        return "must be text"
    if "\n" in value or "\r" in value or "\0" in value:
        return "must not contain line breaks or NUL characters"
    return None


def options_errors(options: dict[str, Any] | None) -> dict[str, str]:
    """Check the options the artefacts need; return ``{"section.key": "problem"}`` (empty when usable)."""
    opts = with_defaults(options)
    errors: dict[str, str] = {}

    def check(path: str, message: str | None) -> None:
        if message:
            errors[path] = message

    for section in DEFAULT_OPTIONS:
        if options and section in options and not isinstance(options[section], dict):
            errors[section] = "must be a mapping"

    for key, value in opts["versions"].items():
        check(f"versions.{key}", None if isinstance(value, str) and VERSION_RE.match(value) else "must look like 1.2.3")

    network = opts["network"]
    check("network.mtu", int_error(network["mtu"], 1280, 9216))
    check("network.rss_queues", int_error(network["rss_queues"], 1, 63))
    check("network.rdma_priority", int_error(network["rdma_priority"], 0, 7))
    check("network.dscp", int_error(network["dscp"], 0, 63))
    check("network.ecn", None if isinstance(network["ecn"], bool) else "must be true or false")

    nccl = opts["nccl"]
    check("nccl.socket_ifname", list_errors(nccl["socket_ifname"]))
    check("nccl.ib_hca", list_errors(nccl["ib_hca"]))
    check(
        "nccl.debug", None if nccl["debug"] in NCCL_DEBUG_LEVELS else f"must be one of {', '.join(NCCL_DEBUG_LEVELS)}"
    )

    cgroup = opts["cgroup"]
    slice_name = cgroup["slice"]
    check(
        "cgroup.slice",
        None if isinstance(slice_name, str) and SLICE_RE.match(slice_name) else "must be a unit name ending in .slice",
    )
    check("cgroup.system_cpus_per_socket", int_error(cgroup["system_cpus_per_socket"], 0, None))
    check("cgroup.system_memory_gib", int_error(cgroup["system_memory_gib"], 0, None))

    scheduler = opts["scheduler"]
    name = scheduler["scheduler_name"]
    check(
        "scheduler.scheduler_name",
        None if isinstance(name, str) and DNS_SUBDOMAIN_RE.match(name) else "must be a lower-case DNS name",
    )
    check("scheduler.placement", None if scheduler["placement"] in PLACEMENTS else "must be 'leaf' or 'numa'")
    check("scheduler.idle_reclaim_minutes", int_error(scheduler["idle_reclaim_minutes"], 1, 10080))

    checkpoints = opts["checkpoints"]
    check("checkpoints.every_steps", int_error(checkpoints["every_steps"], 1, None))
    check("checkpoints.keep_last", int_error(checkpoints["keep_last"], 1, None))
    mount = checkpoints["mount"]
    check(
        "checkpoints.mount",
        None if isinstance(mount, str) and clean_absolute(mount) else "must be an absolute path without '..'",
    )
    tier = checkpoints["tier"]
    check("checkpoints.tier", None if isinstance(tier, str) and TOKEN_RE.match(tier) else "must be a short name")

    environment = opts["environment"]
    if isinstance(environment, dict):
        for env_name, value in environment.items():
            path = f"environment.{env_name}"
            if not isinstance(env_name, str) or not ENV_NAME_RE.match(env_name):
                errors[path] = "name must match ^[A-Z_][A-Z0-9_]*$"
            elif env_name in RESERVED_ENV_NAMES:
                errors[path] = "is set by Rackpilot and cannot be overridden here"
            else:
                check(path, text_error(value))
    image = opts.get("image")
    if image is not None:
        check("image", text_error(image) or (None if image and " " not in image else "must be an image reference"))
    return errors


def clean_absolute(path: str) -> bool:
    pure = PurePosixPath(path)
    return pure.is_absolute() and ".." not in pure.parts and "\0" not in path and "\n" not in path


class PlainDumper(yaml.SafeDumper):
    """Safe dumper that writes repeated objects out in full instead of as ``&id001`` anchors."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def dump_yaml(data: Any, header: str = "") -> str:
    body = yaml.dump(data, Dumper=PlainDumper, sort_keys=False, default_flow_style=False, width=120)
    return f"{header}{body}"


def comment(lines: list[str]) -> str:
    return "".join(f"# {line}\n" if line else "#\n" for line in lines)


def common_items(nodes: list[dict[str, Any]], key: str) -> list[str]:
    """Items of ``node[key]`` present on every node, in the first node's order."""
    first = list(nodes[0].get(key) or [])
    return [item for item in first if all(item in (node.get(key) or []) for node in nodes)]


def load_yaml(name: str, content: str) -> Any:
    try:
        return yaml.safe_load(content)
    except yaml.YAMLError as exc:
        raise ArtefactError(name, f"not valid YAML: {exc}") from exc
