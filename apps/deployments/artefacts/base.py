"""What every artefact shares: the Artefact record, its error, the options it is rendered from (defaults and
checks, keyed by path), and small YAML and text helpers."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from apps.deployments.options import PLAN_DEFAULTS
from apps.inventory.choices import MTU_MAX, MTU_MIN

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


# The variables the profile script builds itself (the toolkit's paths among them); the plan cannot set them.
RESERVED_ENV_NAMES = frozenset({"CUDA_HOME", "PATH", "LD_LIBRARY_PATH", "TF_XLA_FLAGS", "NCCL_DEBUG"})


# The plan's extra variables are written into /etc/profile.d/rackpilot.sh, which every login shell on every node
# sources (root's too), so they are an allow-list: GPU, communication and framework settings only. Everything else is
# refused: shell hooks (PROMPT_COMMAND, BASH_ENV, ENV, PS4), the loader's (LD_PRELOAD, LD_AUDIT, LD_LIBRARY_PATH
# beyond the plan's own toolkit path) and interpreters' start-up hooks (PYTHONSTARTUP, PYTHONPATH, PERL5OPT, ...).
ALLOWED_ENV_PREFIXES = (
    "NCCL_",  # NCCL
    "CUDA_",  # the CUDA runtime (CUDA_VISIBLE_DEVICES, CUDA_DEVICE_MAX_CONNECTIONS, ...)
    "CUDNN_",
    "CUBLAS_",
    "NVIDIA_",  # the container toolkit (NVIDIA_VISIBLE_DEVICES, NVIDIA_DRIVER_CAPABILITIES)
    "TORCH_",  # PyTorch (TORCH_NCCL_ASYNC_ERROR_HANDLING, TORCH_DISTRIBUTED_DEBUG, ...)
    "PYTORCH_",  # PYTORCH_CUDA_ALLOC_CONF
    "TF_",  # TensorFlow
    "XLA_",  # XLA_FLAGS
    "JAX_",
    "OMPI_",  # OpenMPI
    "UCX_",  # UCX, under OpenMPI and NCCL's UCX plugin
    "OMP_",  # OpenMP (OMP_NUM_THREADS, OMP_PROC_BIND)
    "HF_",  # Hugging Face (HF_HOME, HF_HUB_OFFLINE)
    "WANDB_",  # Weights & Biases
)
# Even with an allowed prefix, a variable whose purpose is to load a library or module is refused: NCCL_NET_PLUGIN,
# NCCL_TUNER_PLUGIN, CUDA_INJECTION64_PATH, UCX_MODULE_DIR, OMP_TOOL_LIBRARIES, ... Plugins belong in the node image.
CODE_LOADING_ENV_PARTS = ("PLUGIN", "INJECTION", "PRELOAD", "LIBRARY", "LIBRARIES", "MODULE_DIR", "AUDIT")


def env_name_error(name: Any) -> str | None:
    """Why a variable may not be one of the plan's extra variables (None when it may)."""
    if not isinstance(name, str) or not ENV_NAME_RE.match(name):
        return "name must match ^[A-Z_][A-Z0-9_]*$"
    if name in RESERVED_ENV_NAMES:
        return "is set by Rackpilot and cannot be overridden here"
    if not name.startswith(ALLOWED_ENV_PREFIXES) or any(part in name for part in CODE_LOADING_ENV_PARTS):
        return (
            f"{name} is not allowed: the plan's variables are GPU, communication and framework settings, names "
            f"starting with {', '.join(ALLOWED_ENV_PREFIXES)}, and none that loads a library or plugin"
        )
    return None


def env_value_error(value: Any) -> str | None:
    """A value is one line of printable text: no line or paragraph separator, tab, escape or other control."""
    if not isinstance(value, str):
        return "must be text"
    if not value.isprintable():
        return "must be one line of printable text (no line breaks, tabs or control characters)"
    return None


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
    """Return a copy of ``options`` with every missing section and key filled from the plan's defaults."""
    options = options or {}
    merged: dict[str, dict[str, Any]] = {}
    for section, defaults in PLAN_DEFAULTS.items():
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

    for section in PLAN_DEFAULTS:
        if options and section in options and not isinstance(options[section], dict):
            errors[section] = "must be a mapping"

    for key, value in opts["versions"].items():
        check(f"versions.{key}", None if isinstance(value, str) and VERSION_RE.match(value) else "must look like 1.2.3")

    network = opts["network"]
    check("network.mtu", int_error(network["mtu"], MTU_MIN, MTU_MAX))
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
            check(f"environment.{env_name}", env_name_error(env_name) or env_value_error(value))
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
