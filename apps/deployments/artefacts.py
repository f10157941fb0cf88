"""Configuration files a deployment generates, each validated before anyone can download it.

Pure Python: no ORM. Input is a plain ``options`` dict and a list of node dicts (shapes in the brief of
``render_all``); output is a list of :class:`Artefact`. Every renderer is paired with a validator that parses the
*rendered text* back, so :func:`validate` can re-check an artefact that was stored, edited or corrupted later.

Decisions worth knowing:

* ``nccl-conf``: interface and HCA lists are written with NCCL's ``=`` prefix (exact match). Without it NCCL
  matches prefixes, and ``mlx5_1`` would also select ``mlx5_10`` … ``mlx5_17``. ``NCCL_IB_TC`` is the whole
  IP traffic-class byte on RoCE v2: DSCP in the upper six bits, ECN in the lower two (set by the NIC), hence
  ``dscp * 4``. ``NCCL_IB_SL`` is the service level; on RoCE the NIC maps it to the 802.1p priority of VLAN
  tagged frames, so it is set to the PFC priority (``rdma_priority``) and is harmless where switches trust DSCP.
* ``cgroup-slice``: one file for the *smallest* node shape (fewest CPUs, NUMA nodes and memory). A limit that
  fits the smallest node is safe on larger ones; the file lists the hosts whose shape differs so an operator
  can see what is left unused there.
* ``pod-affinity``: a PodTemplateSpec (``metadata.labels`` + ``spec``), because the anti-affinity selector needs
  labels on the pods it selects. It is checked against the official Kubernetes client's models, and unknown
  keys (which the client silently drops) are rejected by walking the models' ``attribute_map``.
* ``idle-reclaim``: a descheduler ``HighNodeUtilization`` policy rather than ``PodLifeTime``. PodLifeTime
  evicts by age and would kill healthy week-long training runs; HighNodeUtilization evicts pods from nodes
  whose ``nvidia.com/gpu`` requests are below a threshold, so stranded fragments are repacked (the scheduler
  profile scores with ``MostAllocated``, which the descheduler documents as required) and whole 8-GPU nodes
  become free again. The descheduler judges by *requests*, not by SM activity; ``idle_reclaim_minutes`` is the
  descheduling interval (``--descheduling-interval``), written into the header of the file and its
  description, so a fragment survives at most one interval.
"""

from __future__ import annotations

import configparser
import json
import math
import re
import shlex
from dataclasses import dataclass
from functools import cache
from pathlib import Path, PurePosixPath
from typing import Any

import jsonschema
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

IFNAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,14}$")
ENV_NAME_RE = re.compile(r"^[A-Z_][A-Z0-9_]*$")
VERSION_RE = re.compile(r"^[0-9]+(\.[0-9]+)*$")
DNS_LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
DNS_SUBDOMAIN_RE = re.compile(r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_NAME_RE = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]$")
LABEL_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$")
SLICE_RE = re.compile(r"^[A-Za-z0-9:_.\\-]{1,249}\.slice$")
TOKEN_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")

# Variables Rackpilot writes into /etc/profile.d; options["environment"] may not override them.
RESERVED_ENV_NAMES = frozenset({"CUDA_HOME", "PATH", "LD_LIBRARY_PATH", "TF_XLA_FLAGS", "NCCL_DEBUG"})

# Documented NCCL variables (NCCL user guide, "Environment Variables"). nccl.conf may only set these, so a typo
# is caught here rather than silently ignored by NCCL.
KNOWN_NCCL_VARIABLES = frozenset(
    {
        "NCCL_SOCKET_IFNAME",
        "NCCL_SOCKET_FAMILY",
        "NCCL_SOCKET_RETRY_CNT",
        "NCCL_SOCKET_RETRY_SLEEP_MSEC",
        "NCCL_SOCKET_NTHREADS",
        "NCCL_NSOCKS_PERTHREAD",
        "NCCL_CROSS_NIC",
        "NCCL_IB_HCA",
        "NCCL_IB_TIMEOUT",
        "NCCL_IB_RETRY_CNT",
        "NCCL_IB_GID_INDEX",
        "NCCL_IB_ADDR_FAMILY",
        "NCCL_IB_ADDR_RANGE",
        "NCCL_IB_ROCE_VERSION_NUM",
        "NCCL_IB_SL",
        "NCCL_IB_TC",
        "NCCL_IB_FIFO_TC",
        "NCCL_IB_RETURN_ASYNC_EVENTS",
        "NCCL_IB_QPS_PER_CONNECTION",
        "NCCL_IB_SPLIT_DATA_ON_QPS",
        "NCCL_IB_CUDA_SUPPORT",
        "NCCL_IB_PCI_RELAXED_ORDERING",
        "NCCL_IB_ADAPTIVE_ROUTING",
        "NCCL_IB_ECE_ENABLE",
        "NCCL_IB_MERGE_NICS",
        "NCCL_IB_DISABLE",
        "NCCL_OOB_NET_ENABLE",
        "NCCL_OOB_NET_IFNAME",
        "NCCL_UID_STAGGER_THRESHOLD",
        "NCCL_UID_STAGGER_RATE",
        "NCCL_NET",
        "NCCL_NET_PLUGIN",
        "NCCL_TUNER_PLUGIN",
        "NCCL_PROFILER_PLUGIN",
        "NCCL_NET_GDR_LEVEL",
        "NCCL_NET_GDR_READ",
        "NCCL_NET_SHARED_BUFFERS",
        "NCCL_NET_SHARED_COMMS",
        "NCCL_SINGLE_RING_THRESHOLD",
        "NCCL_LL_THRESHOLD",
        "NCCL_TREE_THRESHOLD",
        "NCCL_ALGO",
        "NCCL_PROTO",
        "NCCL_IGNORE_CPU_AFFINITY",
        "NCCL_CONF_FILE",
        "NCCL_DEBUG",
        "NCCL_DEBUG_FILE",
        "NCCL_DEBUG_SUBSYS",
        "NCCL_DEBUG_TIMESTAMP_FORMAT",
        "NCCL_DEBUG_TIMESTAMP_LEVELS",
        "NCCL_COLLNET_ENABLE",
        "NCCL_COLLNET_NODE_THRESHOLD",
        "NCCL_TOPO_FILE",
        "NCCL_TOPO_DUMP_FILE",
        "NCCL_SET_THREAD_NAME",
        "NCCL_P2P_DISABLE",
        "NCCL_P2P_LEVEL",
        "NCCL_P2P_DIRECT_DISABLE",
        "NCCL_SHM_DISABLE",
        "NCCL_BUFFSIZE",
        "NCCL_NTHREADS",
        "NCCL_MAX_NCHANNELS",
        "NCCL_MIN_NCHANNELS",
        "NCCL_CHECKS_DISABLE",
        "NCCL_CHECK_POINTERS",
        "NCCL_LAUNCH_MODE",
        "NCCL_IB_AR_THRESHOLD",
        "NCCL_GRAPH_DUMP_FILE",
        "NCCL_GRAPH_FILE",
        "NCCL_NVLS_ENABLE",
        "NCCL_NVLS_CHUNKSIZE",
        "NCCL_CUMEM_ENABLE",
        "NCCL_CUMEM_HOST_ENABLE",
        "NCCL_MNNVL_ENABLE",
        "NCCL_RAS_ENABLE",
        "NCCL_RAS_ADDR",
        "NCCL_RAS_TIMEOUT_FACTOR",
        "NCCL_PXN_DISABLE",
        "NCCL_P2P_PXN_LEVEL",
        "NCCL_RUNTIME_CONNECT",
        "NCCL_WORK_FIFO_BYTES",
        "NCCL_CTA_POLICY",
        "NCCL_NETDEVS_POLICY",
        "NCCL_NVB_DISABLE",
        "NCCL_GDRCOPY_ENABLE",
    }
)

# systemd.unit(5) [Unit] keys and systemd.resource-control(5) keys valid in a [Slice] section.
SYSTEMD_UNIT_KEYS = frozenset(
    {
        "Description",
        "Documentation",
        "Wants",
        "Requires",
        "Requisite",
        "BindsTo",
        "PartOf",
        "Upholds",
        "Conflicts",
        "Before",
        "After",
        "OnFailure",
        "OnSuccess",
        "PropagatesReloadTo",
        "ReloadPropagatedFrom",
        "PropagatesStopTo",
        "StopPropagatedFrom",
        "JoinsNamespaceOf",
        "RequiresMountsFor",
        "WantsMountsFor",
        "OnFailureJobMode",
        "IgnoreOnIsolate",
        "StopWhenUnneeded",
        "RefuseManualStart",
        "RefuseManualStop",
        "AllowIsolate",
        "DefaultDependencies",
        "SurviveFinalKillSignal",
        "CollectMode",
        "FailureAction",
        "SuccessAction",
        "FailureActionExitStatus",
        "SuccessActionExitStatus",
        "JobTimeoutSec",
        "JobRunningTimeoutSec",
        "JobTimeoutAction",
        "JobTimeoutRebootArgument",
        "StartLimitIntervalSec",
        "StartLimitBurst",
        "StartLimitAction",
        "RebootArgument",
        "SourcePath",
    }
)
SYSTEMD_SLICE_KEYS = frozenset(
    {
        "CPUAccounting",
        "CPUWeight",
        "StartupCPUWeight",
        "CPUQuota",
        "CPUQuotaPeriodSec",
        "AllowedCPUs",
        "StartupAllowedCPUs",
        "AllowedMemoryNodes",
        "StartupAllowedMemoryNodes",
        "MemoryAccounting",
        "MemoryMin",
        "MemoryLow",
        "StartupMemoryLow",
        "DefaultStartupMemoryLow",
        "MemoryHigh",
        "StartupMemoryHigh",
        "MemoryMax",
        "StartupMemoryMax",
        "MemorySwapMax",
        "StartupMemorySwapMax",
        "MemoryZSwapMax",
        "StartupMemoryZSwapMax",
        "MemoryZSwapWriteback",
        "TasksAccounting",
        "TasksMax",
        "IOAccounting",
        "IOWeight",
        "StartupIOWeight",
        "IODeviceWeight",
        "IOReadBandwidthMax",
        "IOWriteBandwidthMax",
        "IOReadIOPSMax",
        "IOWriteIOPSMax",
        "IODeviceLatencyTargetSec",
        "IPAccounting",
        "IPAddressAllow",
        "IPAddressDeny",
        "SocketBindAllow",
        "SocketBindDeny",
        "RestrictNetworkInterfaces",
        "NFTSet",
        "IPIngressFilterPath",
        "IPEgressFilterPath",
        "BPFProgram",
        "DeviceAllow",
        "DevicePolicy",
        "Slice",
        "Delegate",
        "DelegateSubgroup",
        "DisableControllers",
        "ManagedOOMSwap",
        "ManagedOOMMemoryPressure",
        "ManagedOOMMemoryPressureLimit",
        "ManagedOOMMemoryPressureDurationSec",
        "ManagedOOMPreference",
        "MemoryPressureWatch",
        "MemoryPressureThresholdSec",
        "CoredumpReceive",
    }
)
# Keys systemd accepts more than once; every other key appearing twice is an error.
SYSTEMD_LIST_KEYS = frozenset(
    {
        "DeviceAllow",
        "Documentation",
        "IODeviceWeight",
        "IOReadBandwidthMax",
        "IOWriteBandwidthMax",
        "IOReadIOPSMax",
        "IOWriteIOPSMax",
        "IPAddressAllow",
        "IPAddressDeny",
        "After",
        "Before",
        "Wants",
        "Requires",
    }
)

# Device groups as named in /proc/devices. systemd's DeviceAllow= globs only "char-<group>" names, not /dev
# paths, so "/dev/nvidia*" is expressed as "char-nvidia*" (nvidia-frontend, nvidia-uvm, nvidia-caps, ...).
SLICE_DEVICES = (
    ("char-nvidia*", "rw"),
    ("char-infiniband_verbs", "rw"),
    ("char-infiniband_mad", "rw"),
    ("/dev/infiniband/rdma_cm", "rw"),
)


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


# --------------------------------------------------------------------------------------------------- options


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


def _int_error(value: Any, low: int, high: int | None) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return "must be a whole number"
    if value < low or (high is not None and value > high):
        return f"must be between {low} and {high}" if high is not None else f"must be at least {low}"
    return None


def _list_errors(value: Any) -> str | None:
    if not isinstance(value, str):
        return "must be a comma-separated string of interface names"
    if not value:
        return None
    for item in value.split(","):
        if not IFNAME_RE.match(item):
            return f"{item!r} is not a valid interface name (letters, digits, _ . : @ -, at most 15 characters)"
    return None


def _text_error(value: Any) -> str | None:
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
    check("network.mtu", _int_error(network["mtu"], 1280, 9216))
    check("network.rss_queues", _int_error(network["rss_queues"], 1, 63))
    check("network.rdma_priority", _int_error(network["rdma_priority"], 0, 7))
    check("network.dscp", _int_error(network["dscp"], 0, 63))
    check("network.ecn", None if isinstance(network["ecn"], bool) else "must be true or false")

    nccl = opts["nccl"]
    check("nccl.socket_ifname", _list_errors(nccl["socket_ifname"]))
    check("nccl.ib_hca", _list_errors(nccl["ib_hca"]))
    check(
        "nccl.debug", None if nccl["debug"] in NCCL_DEBUG_LEVELS else f"must be one of {', '.join(NCCL_DEBUG_LEVELS)}"
    )

    cgroup = opts["cgroup"]
    slice_name = cgroup["slice"]
    check(
        "cgroup.slice",
        None if isinstance(slice_name, str) and SLICE_RE.match(slice_name) else "must be a unit name ending in .slice",
    )
    check("cgroup.system_cpus_per_socket", _int_error(cgroup["system_cpus_per_socket"], 0, None))
    check("cgroup.system_memory_gib", _int_error(cgroup["system_memory_gib"], 0, None))

    scheduler = opts["scheduler"]
    name = scheduler["scheduler_name"]
    check(
        "scheduler.scheduler_name",
        None if isinstance(name, str) and DNS_SUBDOMAIN_RE.match(name) else "must be a lower-case DNS name",
    )
    check("scheduler.placement", None if scheduler["placement"] in PLACEMENTS else "must be 'leaf' or 'numa'")
    check("scheduler.idle_reclaim_minutes", _int_error(scheduler["idle_reclaim_minutes"], 1, 10080))

    checkpoints = opts["checkpoints"]
    check("checkpoints.every_steps", _int_error(checkpoints["every_steps"], 1, None))
    check("checkpoints.keep_last", _int_error(checkpoints["keep_last"], 1, None))
    mount = checkpoints["mount"]
    check(
        "checkpoints.mount",
        None if isinstance(mount, str) and _clean_absolute(mount) else "must be an absolute path without '..'",
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
                check(path, _text_error(value))
    image = opts.get("image")
    if image is not None:
        check("image", _text_error(image) or (None if image and " " not in image else "must be an image reference"))
    return errors


def _clean_absolute(path: str) -> bool:
    pure = PurePosixPath(path)
    return pure.is_absolute() and ".." not in pure.parts and "\0" not in path and "\n" not in path


# --------------------------------------------------------------------------------------------------- rendering


def render_all(options: dict[str, Any] | None, nodes: list[dict[str, Any]], *, deployment_name: str) -> list[Artefact]:
    """Render and validate every artefact, in :data:`ARTEFACT_NAMES` order."""
    return [render(name, options, nodes, deployment_name=deployment_name) for name in ARTEFACT_NAMES]


def render(name: str, options: dict[str, Any] | None, nodes: list[dict[str, Any]], *, deployment_name: str) -> Artefact:
    """Render one artefact and validate it; raise :class:`ArtefactError` if either fails."""
    if name not in _RENDERERS:
        raise ArtefactError(name, f"unknown artefact; expected one of {', '.join(ARTEFACT_NAMES)}")
    errors = options_errors(options)
    if errors:
        summary = "; ".join(f"{path}: {message}" for path, message in errors.items())
        raise ArtefactError(name, f"invalid options ({summary})", errors=errors)
    if not TOKEN_RE.match(deployment_name or ""):
        raise ArtefactError(name, "deployment_name must be a short name (letters, digits, . _ -)")
    if not nodes:
        raise ArtefactError(name, "no nodes to render for")
    artefact = _RENDERERS[name](with_defaults(options), nodes, deployment_name)
    validate(artefact)
    return artefact


def validate(artefact: Artefact) -> None:
    """Re-validate a rendered artefact from its text; raise :class:`ArtefactError` when it is not acceptable."""
    validator = _VALIDATORS.get(artefact.name)
    if validator is None:
        raise ArtefactError(artefact.name, "unknown artefact")
    try:
        validator(artefact.content)
    except ArtefactError:
        raise
    except (ValueError, TypeError, KeyError, yaml.YAMLError, configparser.Error) as exc:
        raise ArtefactError(artefact.name, str(exc)) from exc


class _PlainDumper(yaml.SafeDumper):
    """Safe dumper that writes repeated objects out in full instead of as ``&id001`` anchors."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _dump_yaml(data: Any, header: str = "") -> str:
    body = yaml.dump(data, Dumper=_PlainDumper, sort_keys=False, default_flow_style=False, width=120)
    return f"{header}{body}"


def _comment(lines: list[str]) -> str:
    return "".join(f"# {line}\n" if line else "#\n" for line in lines)


def _common(nodes: list[dict[str, Any]], key: str) -> list[str]:
    """Items of ``node[key]`` present on every node, in the first node's order."""
    first = list(nodes[0].get(key) or [])
    return [item for item in first if all(item in (node.get(key) or []) for node in nodes)]


def _render_nccl_conf(opts: dict[str, Any], nodes: list[dict[str, Any]], deployment: str) -> Artefact:
    nccl, network = opts["nccl"], opts["network"]
    ifnames = [i for i in nccl["socket_ifname"].split(",") if i] or _common(nodes, "data_nics")
    hcas = [h for h in nccl["ib_hca"].split(",") if h] or _common(nodes, "rdma_devices")
    for node in nodes:
        known = set(node.get("rdma_devices") or [])
        missing = [hca for hca in hcas if known and hca.split(":")[0] not in known]
        if missing:
            raise ArtefactError("nccl-conf", f"{node.get('hostname')}: no RDMA device {', '.join(missing)}")
    settings: dict[str, str] = {}
    if ifnames:
        settings["NCCL_SOCKET_IFNAME"] = "=" + ",".join(ifnames)
    if hcas:
        settings["NCCL_IB_HCA"] = "=" + ",".join(hcas)
    settings["NCCL_IB_GID_INDEX"] = "3"
    settings["NCCL_IB_TC"] = str(network["dscp"] * 4)
    settings["NCCL_IB_SL"] = str(network["rdma_priority"])
    settings["NCCL_DEBUG"] = nccl["debug"]
    settings["NCCL_DEBUG_SUBSYS"] = "INIT,NET"
    content = "".join(f"{key}={value}\n" for key, value in settings.items())
    return Artefact(
        name="nccl-conf",
        filename="/etc/nccl.conf",
        media_type=TEXT_MEDIA_TYPE,
        content=content,
        description=(
            "System-wide NCCL settings (NCCL reads /etc/nccl.conf; the environment still wins). Exact-match "
            f"interface and HCA lists; RoCE v2 GID index 3; traffic class {settings['NCCL_IB_TC']} = DSCP "
            f"{network['dscp']} x 4; service level {network['rdma_priority']} = the lossless (PFC) priority."
        ),
    )


def _validate_nccl_conf(content: str) -> None:
    if not content.endswith("\n"):
        raise ArtefactError("nccl-conf", "file must end with a newline")
    seen: set[str] = set()
    for number, line in enumerate(content.splitlines(), start=1):
        name, sep, value = line.partition("=")
        if not sep or not name:
            raise ArtefactError("nccl-conf", f"line {number} is not NAME=VALUE")
        if name not in KNOWN_NCCL_VARIABLES:
            raise ArtefactError("nccl-conf", f"line {number}: {name} is not a documented NCCL variable")
        if name in seen:
            raise ArtefactError("nccl-conf", f"line {number}: {name} is set twice")
        if not value or value != value.strip() or "\0" in value or "\r" in value:
            raise ArtefactError("nccl-conf", f"line {number}: {name} has an empty or malformed value")
        seen.add(name)


# Shell words the environment file may contain: single-quoted literals, safe bare characters, and double-quoted
# text whose only expansions are ${NAME} or ${NAME:+:${NAME}} (no command substitution, no backslashes).
_SHELL_SEGMENT_RE = re.compile(
    r"""'(?P<single>[^']*)'"""
    r'''|"(?P<double>(?:\$\{[A-Z_][A-Z0-9_]*(?::\+:\$\{[A-Z_][A-Z0-9_]*\})?\}|[^"$`\\])*)"'''
    r"""|(?P<bare>[A-Za-z0-9_@%+=:,./-]+)"""
)
_EXPORT_RE = re.compile(r"^export (?P<name>[A-Z_][A-Z0-9_]*)=(?P<value>.*)$")


def parse_environment(content: str) -> dict[str, str]:
    """Parse the profile script back into ``{NAME: value}``; expansions are kept as written (``${PATH}``)."""
    parsed: dict[str, str] = {}
    for number, line in enumerate(content.splitlines(), start=1):
        if not line or line.startswith("#"):
            continue
        match = _EXPORT_RE.match(line)
        if not match:
            raise ArtefactError("environment", f"line {number} is not `export NAME=value`")
        name, rest = match["name"], match["value"]
        value, position = [], 0
        while position < len(rest):
            segment = _SHELL_SEGMENT_RE.match(rest, position)
            if not segment:
                raise ArtefactError("environment", f"line {number}: unsafe shell text after {rest[:position]!r}")
            value.append(next(part for part in segment.groups() if part is not None))
            position = segment.end()
        text = "".join(value)
        # Cross-check with Python's POSIX tokenizer: one `export` and one NAME=value word, same value.
        words = shlex.split(line, comments=False, posix=True)
        if words != ["export", f"{name}={text}"]:
            raise ArtefactError("environment", f"line {number} does not parse as a single assignment")
        if name in parsed:
            raise ArtefactError("environment", f"line {number}: {name} is exported twice")
        parsed[name] = text
    return parsed


def _environment_values(opts: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """``{NAME: (shell text, value as parsed back)}`` for every exported variable."""
    cuda_home = f"/usr/local/cuda-{opts['versions']['cuda']}"
    values = {
        "CUDA_HOME": (shlex.quote(cuda_home), cuda_home),
        "PATH": (f'{cuda_home}/bin:"${{PATH}}"', f"{cuda_home}/bin:${{PATH}}"),
        # No trailing ':' when LD_LIBRARY_PATH was empty: an empty entry means "current directory".
        "LD_LIBRARY_PATH": (
            f'{cuda_home}/lib64"${{LD_LIBRARY_PATH:+:${{LD_LIBRARY_PATH}}}}"',
            f"{cuda_home}/lib64${{LD_LIBRARY_PATH:+:${{LD_LIBRARY_PATH}}}}",
        ),
        "TF_XLA_FLAGS": ("--tf_xla_auto_jit=2", "--tf_xla_auto_jit=2"),
        "NCCL_DEBUG": (shlex.quote(opts["nccl"]["debug"]), opts["nccl"]["debug"]),
    }
    for name, value in sorted(opts["environment"].items()):
        values[name] = (shlex.quote(str(value)), str(value))
    return values


def _render_environment(opts: dict[str, Any], nodes: list[dict[str, Any]], deployment: str) -> Artefact:
    values = _environment_values(opts)
    header = _comment(
        [
            f"Rackpilot deployment {deployment}: login environment for GPU nodes. Generated; do not edit.",
            "TF_XLA_FLAGS=--tf_xla_auto_jit=2 turns XLA auto-clustering on for TensorFlow.",
        ]
    )
    content = header + "".join(f"export {name}={shell}\n" for name, (shell, _) in values.items())
    parsed = parse_environment(content)
    expected = {name: value for name, (_, value) in values.items()}
    if parsed != expected:
        raise ArtefactError("environment", "values do not survive a round trip through the shell parser")
    return Artefact(
        name="environment",
        filename="/etc/profile.d/rackpilot.sh",
        media_type=SHELL_MEDIA_TYPE,
        content=content,
        description=(
            f"CUDA {opts['versions']['cuda']} paths, XLA for TensorFlow and "
            f"{len(opts['environment'])} extra variable(s)."
        ),
    )


def _validate_environment(content: str) -> None:
    parsed = parse_environment(content)
    missing = sorted(RESERVED_ENV_NAMES - parsed.keys())
    if missing:
        raise ArtefactError("environment", f"missing {', '.join(missing)}")


def _smallest_shape(nodes: list[dict[str, Any]]) -> tuple[int, int, int]:
    numa = min(int(node.get("numa_nodes") or 1) for node in nodes)
    cpus = min(int(node.get("cpu_count") or 0) for node in nodes)
    memory = min(int(node.get("memory_gib") or 0) for node in nodes)
    return numa, cpus, memory


def _cpu_ranges(cpus: list[int]) -> str:
    ranges, start = [], None
    for index, cpu in enumerate(cpus):
        if start is None:
            start = cpu
        if index + 1 == len(cpus) or cpus[index + 1] != cpu + 1:
            ranges.append(str(start) if start == cpu else f"{start}-{cpu}")
            start = None
    return ",".join(ranges)


def _render_cgroup_slice(opts: dict[str, Any], nodes: list[dict[str, Any]], deployment: str) -> Artefact:
    cgroup = opts["cgroup"]
    numa, cpus, memory = _smallest_shape(nodes)
    reserved_per_socket = cgroup["system_cpus_per_socket"]
    if cpus <= 0 or cpus % numa:
        raise ArtefactError("cgroup-slice", f"cannot split {cpus} CPUs evenly over {numa} NUMA node(s)")
    per_socket = cpus // numa
    if reserved_per_socket >= per_socket:
        raise ArtefactError(
            "cgroup-slice", f"reserving {reserved_per_socket} CPUs leaves none of {per_socket} per socket"
        )
    training_memory = memory - cgroup["system_memory_gib"]
    if training_memory <= 0:
        raise ArtefactError("cgroup-slice", f"{memory} GiB of memory leaves nothing after the system reservation")
    reserved = [socket * per_socket + core for socket in range(numa) for core in range(reserved_per_socket)]
    training = [cpu for cpu in range(cpus) if cpu not in set(reserved)]
    differing = sorted(
        str(node.get("hostname"))
        for node in nodes
        if (int(node.get("numa_nodes") or 1), int(node.get("cpu_count") or 0), int(node.get("memory_gib") or 0))
        != (numa, cpus, memory)
    )
    lines = [
        f"Rackpilot deployment {deployment}: cgroup slice for training work. Generated; do not edit.",
        f"Rendered for the smallest node shape: {numa} socket(s), {cpus} CPUs, {memory} GiB.",
        f"Larger nodes (not fully used by this slice): {', '.join(differing)}"
        if differing
        else "All nodes share this shape.",
        f"CPUs: the first {reserved_per_socket} of each socket's block of {per_socket} stay with the system;",
        "this assumes CPUs are numbered socket by socket. Where SMT siblings are numbered after all cores,",
        "the siblings of the reserved cores remain in the training set.",
        "system-reserved: give the kubelet the same reservation, e.g.",
        f"--reserved-cpus={_cpu_ranges(reserved) or 'none'}",
        f"and --system-reserved=memory={cgroup['system_memory_gib']}Gi.",
        "DeviceAllow= only globs /proc/devices group names, so /dev/nvidia* is char-nvidia* and /dev/infiniband/*",
        "is the uverbs and umad groups plus the rdma_cm node.",
    ]
    body = [
        "[Unit]",
        f"Description=Rackpilot training workloads ({deployment})",
        "Before=slices.target",
        "",
        "[Slice]",
        "CPUAccounting=yes",
        "MemoryAccounting=yes",
        f"AllowedCPUs={_cpu_ranges(training)}",
        f"AllowedMemoryNodes={_cpu_ranges(list(range(numa)))}",
        f"MemoryMax={training_memory}G",
        "DevicePolicy=closed",
        *(f"DeviceAllow={device} {access}" for device, access in SLICE_DEVICES),
    ]
    content = _comment(lines) + "\n".join(body) + "\n"
    return Artefact(
        name="cgroup-slice",
        filename=f"/etc/systemd/system/{cgroup['slice']}",
        media_type=TEXT_MEDIA_TYPE,
        content=content,
        description=(
            f"systemd slice keeping training off {reserved_per_socket} CPU(s) per socket and "
            f"{cgroup['system_memory_gib']} GiB reserved for the system; GPUs and RDMA devices allowed."
        ),
    )


class _NumberedKeys:
    """``optionxform`` that keeps case and numbers repeatable keys, so strict parsing still rejects other repeats."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def __call__(self, key: str) -> str:
        if key not in SYSTEMD_LIST_KEYS:
            return key
        self.counts[key] = self.counts.get(key, 0) + 1
        return f"{key}#{self.counts[key]}"


def _validate_cgroup_slice(content: str) -> None:
    parser = configparser.ConfigParser(
        strict=True, interpolation=None, empty_lines_in_values=False, delimiters=("=",), comment_prefixes=("#", ";")
    )
    parser.optionxform = _NumberedKeys()  # type: ignore[assignment, method-assign]
    parser.read_string(content)
    if parser.sections() != ["Unit", "Slice"]:
        raise ArtefactError("cgroup-slice", f"expected sections [Unit] and [Slice], found {parser.sections()}")
    allowed = {"Unit": SYSTEMD_UNIT_KEYS, "Slice": SYSTEMD_SLICE_KEYS}
    for section, keys in allowed.items():
        for key in parser[section]:
            if key.split("#")[0] not in keys:
                raise ArtefactError("cgroup-slice", f"[{section}] {key} is not a systemd setting for slices")
    slice_ = parser["Slice"]
    if not parser["Unit"].get("Description"):
        raise ArtefactError("cgroup-slice", "[Unit] needs a Description")
    if not re.fullmatch(r"[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*", slice_.get("AllowedCPUs", "")):
        raise ArtefactError("cgroup-slice", "AllowedCPUs must be a CPU list such as 2-111,114-223")
    if not re.fullmatch(r"[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*", slice_.get("AllowedMemoryNodes", "")):
        raise ArtefactError("cgroup-slice", "AllowedMemoryNodes must be a NUMA node list")
    if not re.fullmatch(r"[0-9]+[KMGT]?", slice_.get("MemoryMax", "")):
        raise ArtefactError("cgroup-slice", "MemoryMax must be a size such as 2016G")
    for key, value in slice_.items():
        if key.startswith("DeviceAllow#") and not re.fullmatch(r"(/dev/\S+|(char|block)-\S+)( [rwm]{1,3})?", value):
            raise ArtefactError("cgroup-slice", f"DeviceAllow={value} is not 'DEVICE [rwm]'")


def _render_kube_scheduler(opts: dict[str, Any], nodes: list[dict[str, Any]], deployment: str) -> Artefact:
    scheduler = opts["scheduler"]
    if scheduler["placement"] == "leaf":
        preference = {"matchExpressions": [{"key": LEAF_LABEL, "operator": "Exists"}]}
        topology = "nodes on a leaf switch; training pods then prefer their peers' leaf (InterPodAffinity)"
    else:
        preference = {"matchExpressions": [{"key": NUMA_LABEL, "operator": "In", "values": ["true"]}]}
        topology = "NUMA-aligned nodes (GPUs and RDMA NICs split evenly over sockets)"
    config = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [
            {
                "schedulerName": scheduler["scheduler_name"],
                "plugins": {
                    "score": {
                        "enabled": [
                            {"name": "NodeResourcesFit", "weight": 5},
                            {"name": "InterPodAffinity", "weight": 5},
                            {"name": "NodeAffinity", "weight": 2},
                        ],
                        "disabled": [{"name": "NodeResourcesBalancedAllocation"}, {"name": "PodTopologySpread"}],
                    }
                },
                "pluginConfig": [
                    {
                        "name": "NodeResourcesFit",
                        "args": {
                            "scoringStrategy": {
                                "type": "MostAllocated",
                                "resources": [
                                    {"name": GPU_RESOURCE, "weight": 10},
                                    {"name": "cpu", "weight": 1},
                                    {"name": "memory", "weight": 1},
                                ],
                            }
                        },
                    },
                    {"name": "InterPodAffinity", "args": {"hardPodAffinityWeight": 10}},
                    {
                        "name": "NodeAffinity",
                        "args": {
                            "addedAffinity": {
                                "preferredDuringSchedulingIgnoredDuringExecution": [
                                    {"weight": 100, "preference": preference}
                                ]
                            }
                        },
                    },
                ],
            }
        ],
    }
    header = _comment(
        [
            f"Rackpilot deployment {deployment}: kube-scheduler profile for training jobs. Generated; do not edit.",
            f"Packs GPUs (MostAllocated) and prefers {topology}.",
            "Run as a second scheduler: kube-scheduler --config=<this file>.",
        ]
    )
    return Artefact(
        name="kube-scheduler",
        filename="kube-scheduler-config.yaml",
        media_type=YAML_MEDIA_TYPE,
        content=_dump_yaml(config, header),
        description=(
            f"Scheduler profile {scheduler['scheduler_name']!r}: packs GPUs, {scheduler['placement']}-aware placement."
        ),
    )


@cache
def _schema(filename: str) -> jsonschema.protocols.Validator:
    schema = json.loads((SCHEMA_DIR / filename).read_text(encoding="utf-8"))
    validator_class = jsonschema.validators.validator_for(schema)
    validator_class.check_schema(schema)
    return validator_class(schema)


def _check_schema(name: str, filename: str, document: Any) -> None:
    error = jsonschema.exceptions.best_match(_schema(filename).iter_errors(document))
    if error is not None:
        where = "/".join(str(part) for part in error.absolute_path) or "(document)"
        raise ArtefactError(name, f"{where}: {error.message}")


def _load_yaml(name: str, content: str) -> Any:
    try:
        return yaml.safe_load(content)
    except yaml.YAMLError as exc:
        raise ArtefactError(name, f"not valid YAML: {exc}") from exc


def _validate_kube_scheduler(content: str) -> None:
    _check_schema("kube-scheduler", "kubescheduler-config-v1.json", _load_yaml("kube-scheduler", content))


def _pod_labels(deployment: str) -> dict[str, str]:
    return {DEPLOYMENT_LABEL: deployment, ROLE_LABEL: "trainer"}


def _render_pod_affinity(opts: dict[str, Any], nodes: list[dict[str, Any]], deployment: str) -> Artefact:
    versions = opts["versions"]
    image = opts.get("image") or f"registry.local/rackpilot/trainer:pytorch{versions['pytorch']}-cuda{versions['cuda']}"
    gpus = min(int(node.get("gpus") or 0) for node in nodes)
    selector = {"matchLabels": _pod_labels(deployment)}
    template = {
        "metadata": {"labels": _pod_labels(deployment)},
        "spec": {
            "schedulerName": opts["scheduler"]["scheduler_name"],
            "affinity": {
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": selector, "topologyKey": "kubernetes.io/hostname"}
                    ]
                },
                "podAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 100, "podAffinityTerm": {"labelSelector": selector, "topologyKey": LEAF_LABEL}}
                    ]
                },
            },
            "tolerations": [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [
                {
                    "name": "trainer",
                    "image": image,
                    "resources": {"limits": {GPU_RESOURCE: str(gpus)}},
                }
            ],
        },
    }
    header = _comment(
        [
            f"Rackpilot deployment {deployment}: pod template fragment for training jobs. Generated.",
            "One trainer per node (anti-affinity on hostname); peers preferred on the same leaf switch.",
        ]
    )
    return Artefact(
        name="pod-affinity",
        filename="training-pod-template.yaml",
        media_type=YAML_MEDIA_TYPE,
        content=_dump_yaml(template, header),
        description="PodTemplateSpec fragment: scheduler name, one pod per node, same-leaf preference, GPU toleration.",
    )


_K8S_PRIMITIVES = frozenset({"str", "int", "float", "bool", "object", "datetime", "date", "bytearray", "bytes"})


def _model_type(type_name: str) -> tuple[str, str]:
    """Split a kubernetes-client type string into (container kind, inner type)."""
    for pattern, kind in (
        (r"^Optional\[(.*)\]$", "optional"),
        (r"^(?:List|list)\[(.*)\]$", "list"),
        (r"^Dict\[str, (.*)\]$", "dict"),
        (r"^dict\(str, (.*)\)$", "dict"),
    ):
        match = re.match(pattern, type_name)
        if match:
            return kind, match.group(1)
    return "plain", type_name


def unknown_kubernetes_keys(data: Any, type_name: str, path: str = "") -> list[str]:
    """Key paths in ``data`` that the official client model ``type_name`` does not define (it drops them)."""
    from kubernetes.client import models

    kind, inner = _model_type(type_name)
    if kind == "optional":
        return unknown_kubernetes_keys(data, inner, path)
    if kind == "list":
        if not isinstance(data, list):
            return []
        return [
            key for index, item in enumerate(data) for key in unknown_kubernetes_keys(item, inner, f"{path}[{index}]")
        ]
    if kind == "dict":
        if not isinstance(data, dict):
            return []
        return [key for name, item in data.items() for key in unknown_kubernetes_keys(item, inner, f"{path}.{name}")]
    model = getattr(models, inner, None) if inner not in _K8S_PRIMITIVES else None
    if model is None or not isinstance(data, dict) or not hasattr(model, "attribute_map"):
        return []
    by_json_key = {json_key: attribute for attribute, json_key in model.attribute_map.items()}
    unknown = []
    for key, value in data.items():
        key_path = f"{path}.{key}" if path else str(key)
        if key not in by_json_key:
            unknown.append(key_path)
        else:
            unknown.extend(unknown_kubernetes_keys(value, model.openapi_types[by_json_key[key]], key_path))
    return unknown


def _check_kubernetes_model(name: str, data: Any, type_name: str) -> Any:
    """Deserialize ``data`` with the official client (types, required fields) and refuse unknown keys."""
    from kubernetes.client import ApiClient

    if not isinstance(data, dict):
        raise ArtefactError(name, f"expected a {type_name} mapping")
    unknown = unknown_kubernetes_keys(data, type_name)
    if unknown:
        raise ArtefactError(name, f"unknown field(s) for {type_name}: {', '.join(unknown)}")
    client = ApiClient()
    try:
        return client.deserialize(json.dumps(data), type_name, "application/json")
    except (ValueError, TypeError) as exc:
        raise ArtefactError(name, f"not a valid {type_name}: {exc}") from exc
    finally:
        client.close()


def _validate_pod_affinity(content: str) -> None:
    document = _load_yaml("pod-affinity", content)
    template = _check_kubernetes_model("pod-affinity", document, "V1PodTemplateSpec")
    spec = template.spec
    if spec is None or not spec.scheduler_name:
        raise ArtefactError("pod-affinity", "spec.schedulerName is required")
    anti = spec.affinity and spec.affinity.pod_anti_affinity
    terms = (anti and anti.required_during_scheduling_ignored_during_execution) or []
    if not any(term.topology_key == "kubernetes.io/hostname" for term in terms):
        raise ArtefactError("pod-affinity", "needs required pod anti-affinity on kubernetes.io/hostname")
    for key, value in (template.metadata.labels or {}).items() if template.metadata else ():
        _check_label("pod-affinity", f"metadata.labels.{key}", key, value)


def _numa_aligned(node: dict[str, Any]) -> bool:
    numa = int(node.get("numa_nodes") or 1)
    gpus = int(node.get("gpus") or 0)
    rdma = len(node.get("rdma_devices") or [])
    return gpus > 0 and gpus % numa == 0 and rdma % numa == 0


def _render_node_labels(opts: dict[str, Any], nodes: list[dict[str, Any]], deployment: str) -> Artefact:
    labels: dict[str, dict[str, str]] = {}
    for node in sorted(nodes, key=lambda n: str(n.get("hostname"))):
        hostname = str(node.get("hostname") or "")
        if hostname in labels:
            raise ArtefactError("node-labels", f"hostname {hostname} appears twice")
        entry = {
            RACK_LABEL: str(node.get("rack") or ""),
            LEAF_LABEL: str(node.get("leaf") or ""),
            NUMA_LABEL: "true" if _numa_aligned(node) else "false",
            GPU_COUNT_LABEL: str(int(node.get("gpus") or 0)),
        }
        labels[hostname] = {key: value for key, value in entry.items() if value}
    header = _comment(
        [
            f"Rackpilot deployment {deployment}: node labels, hostname -> labels. Generated.",
            "Apply with: kubectl label node <hostname> <key>=<value> ... --overwrite",
            f"{NUMA_LABEL} is 'true' when GPUs and RDMA NICs split evenly over the node's sockets.",
            f"{GPU_COUNT_LABEL} is also published by GPU feature discovery, which keeps it current.",
        ]
    )
    return Artefact(
        name="node-labels",
        filename="node-labels.yaml",
        media_type=YAML_MEDIA_TYPE,
        content=_dump_yaml(labels, header),
        description=f"Rack, leaf, NUMA-alignment and GPU-count labels for {len(labels)} node(s).",
    )


def _check_label(artefact: str, where: str, key: Any, value: Any) -> None:
    if not isinstance(key, str) or not isinstance(value, str):
        raise ArtefactError(artefact, f"{where}: label keys and values must be strings")
    prefix, _, name = key.rpartition("/")
    if (prefix and not DNS_SUBDOMAIN_RE.match(prefix)) or not LABEL_NAME_RE.match(name):
        raise ArtefactError(artefact, f"{where}: {key!r} is not a valid label key")
    if not LABEL_VALUE_RE.match(value):
        raise ArtefactError(artefact, f"{where}: {value!r} is not a valid label value (at most 63 characters)")


def _validate_node_labels(content: str) -> None:
    document = _load_yaml("node-labels", content)
    if not isinstance(document, dict) or not document:
        raise ArtefactError("node-labels", "expected a mapping of hostname to labels")
    for hostname, labels in document.items():
        if not isinstance(hostname, str) or not DNS_SUBDOMAIN_RE.match(hostname):
            raise ArtefactError("node-labels", f"{hostname!r} is not a valid node name")
        if not isinstance(labels, dict):
            raise ArtefactError("node-labels", f"{hostname}: labels must be a mapping")
        for key, value in labels.items():
            _check_label("node-labels", hostname, key, value)


def _render_idle_reclaim(opts: dict[str, Any], nodes: list[dict[str, Any]], deployment: str) -> Artefact:
    minutes = opts["scheduler"]["idle_reclaim_minutes"]
    gpus = max(int(node.get("gpus") or 0) for node in nodes) or 8
    # Below half of the node's GPUs requested counts as a fragment worth repacking (e.g. 3 of 8 -> 37 %).
    threshold = math.floor(100 * (gpus // 2) / gpus) if gpus > 1 else 0
    policy = {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "maxNoOfPodsToEvictPerNode": gpus,
        "profiles": [
            {
                "name": f"{deployment}-idle-gpu-reclaim",
                "pluginConfig": [
                    {
                        "name": "DefaultEvictor",
                        "args": {"nodeFit": True},
                    },
                    {
                        "name": "HighNodeUtilization",
                        "args": {"thresholds": {GPU_RESOURCE: threshold}, "numberOfNodes": 0},
                    },
                ],
                "plugins": {"balance": {"enabled": ["HighNodeUtilization"]}},
            }
        ],
    }
    header = _comment(
        [
            f"Rackpilot deployment {deployment}: idle GPU reclaim policy for the descheduler. Generated.",
            f"Run: descheduler --policy-config-file=<this file> --descheduling-interval={minutes}m",
            f"Nodes with fewer than {threshold}% of their GPUs requested are emptied so the MostAllocated",
            "scheduler profile repacks their pods and whole nodes become free. Only pods owned by a controller",
            "(so they are recreated) and that fit on another node (nodeFit) are evicted.",
        ]
    )
    return Artefact(
        name="idle-reclaim",
        filename="descheduler-policy.yaml",
        media_type=YAML_MEDIA_TYPE,
        content=_dump_yaml(policy, header),
        description=f"Descheduler HighNodeUtilization on {GPU_RESOURCE}, every {minutes} minutes.",
    )


def _validate_idle_reclaim(content: str) -> None:
    _check_schema("idle-reclaim", "descheduler-policy-v1alpha2.json", _load_yaml("idle-reclaim", content))
    if not re.search(r"^# Run: .*--descheduling-interval=[0-9]+m$", content, re.MULTILINE):
        raise ArtefactError("idle-reclaim", "the header must state the descheduling interval")


def _render_checkpoints(opts: dict[str, Any], nodes: list[dict[str, Any]], deployment: str) -> Artefact:
    checkpoints = opts["checkpoints"]
    settings = {
        "every_steps": checkpoints["every_steps"],
        "directory": str(PurePosixPath(checkpoints["mount"]) / deployment),
        "tier": checkpoints["tier"],
        "keep_last": checkpoints["keep_last"],
        "format": CHECKPOINT_FORMAT,
    }
    header = _comment([f"Rackpilot deployment {deployment}: checkpoint policy for training jobs. Generated."])
    return Artefact(
        name="checkpoints",
        filename="/etc/rackpilot/checkpoint.yaml",
        media_type=YAML_MEDIA_TYPE,
        content=_dump_yaml(settings, header),
        description=(
            f"Checkpoint every {settings['every_steps']} steps to {settings['directory']}, "
            f"keep the last {settings['keep_last']}."
        ),
    )


def _validate_checkpoints(content: str) -> None:
    document = _load_yaml("checkpoints", content)
    expected = {"every_steps", "directory", "tier", "keep_last", "format"}
    if not isinstance(document, dict) or set(document) != expected:
        raise ArtefactError("checkpoints", f"expected exactly the keys {', '.join(sorted(expected))}")
    for key in ("every_steps", "keep_last"):
        if _int_error(document[key], 1, None):
            raise ArtefactError("checkpoints", f"{key} must be a whole number of at least 1")
    if not isinstance(document["directory"], str) or not _clean_absolute(document["directory"]):
        raise ArtefactError("checkpoints", "directory must be an absolute path")
    if document["format"] != CHECKPOINT_FORMAT:
        raise ArtefactError("checkpoints", f"format must be {CHECKPOINT_FORMAT}")


_RENDERERS = {
    "nccl-conf": _render_nccl_conf,
    "environment": _render_environment,
    "cgroup-slice": _render_cgroup_slice,
    "kube-scheduler": _render_kube_scheduler,
    "pod-affinity": _render_pod_affinity,
    "node-labels": _render_node_labels,
    "idle-reclaim": _render_idle_reclaim,
    "checkpoints": _render_checkpoints,
}
_VALIDATORS = {
    "nccl-conf": _validate_nccl_conf,
    "environment": _validate_environment,
    "cgroup-slice": _validate_cgroup_slice,
    "kube-scheduler": _validate_kube_scheduler,
    "pod-affinity": _validate_pod_affinity,
    "node-labels": _validate_node_labels,
    "idle-reclaim": _validate_idle_reclaim,
    "checkpoints": _validate_checkpoints,
}
