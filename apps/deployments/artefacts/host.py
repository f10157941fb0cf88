"""Files written onto each node: /etc/nccl.conf, the profile script, the cgroup slice, the checkpoint settings."""

from __future__ import annotations

import configparser
import re
import shlex
from pathlib import PurePosixPath
from typing import Any

from apps.core.text import counted
from apps.deployments.artefacts.base import (
    CHECKPOINT_FORMAT,
    RESERVED_ENV_NAMES,
    SHELL_MEDIA_TYPE,
    TEXT_MEDIA_TYPE,
    YAML_MEDIA_TYPE,
    Artefact,
    ArtefactError,
    clean_absolute,
    comment,
    common_items,
    dump_yaml,
    env_name_error,
    env_value_error,
    int_error,
    load_yaml,
)

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


SLICE_DEVICES = (
    ("char-nvidia*", "rw"),
    ("char-infiniband_verbs", "rw"),
    ("char-infiniband_mad", "rw"),
    ("/dev/infiniband/rdma_cm", "rw"),
)


def _render_nccl_conf(opts: dict[str, Any], nodes: list[dict[str, Any]], deployment: str) -> Artefact:
    nccl, network = opts["nccl"], opts["network"]
    ifnames = [i for i in nccl["socket_ifname"].split(",") if i] or common_items(nodes, "data_nics")
    hcas = [h for h in nccl["ib_hca"].split(",") if h] or common_items(nodes, "rdma_devices")
    for node in nodes:
        known = set(node.get("rdma_devices") or [])
        missing = [hca for hca in hcas if known and hca.split(":")[0] not in known]
        if missing:
            message = f"{node.get('hostname')}: no RDMA device {', '.join(missing)}"
            raise ArtefactError("nccl-conf", message, errors={"nccl.ib_hca": message})
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
    header = comment(
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
            f"{counted(len(opts['environment']), 'extra variable')}."
        ),
    )


def _validate_environment(content: str) -> None:
    parsed = parse_environment(content)
    missing = sorted(RESERVED_ENV_NAMES - parsed.keys())
    if missing:
        raise ArtefactError("environment", f"missing {', '.join(missing)}")
    for name, value in parsed.items():
        problem = (None if name in RESERVED_ENV_NAMES else env_name_error(name)) or env_value_error(value)
        if problem:
            raise ArtefactError("environment", f"{name}: {problem}")


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
        raise ArtefactError("cgroup-slice", f"cannot split {cpus} CPUs evenly over {counted(numa, 'NUMA node')}")
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
        f"Rendered for the smallest node shape: {counted(numa, 'socket')}, {cpus} CPUs, {memory} GiB.",
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
    content = comment(lines) + "\n".join(body) + "\n"
    return Artefact(
        name="cgroup-slice",
        filename=f"/etc/systemd/system/{cgroup['slice']}",
        media_type=TEXT_MEDIA_TYPE,
        content=content,
        description=(
            f"systemd slice keeping training off {counted(reserved_per_socket, 'CPU')} per socket and "
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


def _render_checkpoints(opts: dict[str, Any], nodes: list[dict[str, Any]], deployment: str) -> Artefact:
    checkpoints = opts["checkpoints"]
    settings = {
        "every_steps": checkpoints["every_steps"],
        "directory": str(PurePosixPath(checkpoints["mount"]) / deployment),
        "tier": checkpoints["tier"],
        "keep_last": checkpoints["keep_last"],
        "format": CHECKPOINT_FORMAT,
    }
    header = comment([f"Rackpilot deployment {deployment}: checkpoint policy for training jobs. Generated."])
    return Artefact(
        name="checkpoints",
        filename="/etc/rackpilot/checkpoint.yaml",
        media_type=YAML_MEDIA_TYPE,
        content=dump_yaml(settings, header),
        description=(
            f"Checkpoint every {settings['every_steps']} steps to {settings['directory']}, "
            f"keep the last {settings['keep_last']}."
        ),
    )


def _validate_checkpoints(content: str) -> None:
    document = load_yaml("checkpoints", content)
    expected = {"every_steps", "directory", "tier", "keep_last", "format"}
    if not isinstance(document, dict) or set(document) != expected:
        raise ArtefactError("checkpoints", f"expected exactly the keys {', '.join(sorted(expected))}")
    for key in ("every_steps", "keep_last"):
        if int_error(document[key], 1, None):
            raise ArtefactError("checkpoints", f"{key} must be a whole number of at least 1")
    if not isinstance(document["directory"], str) or not clean_absolute(document["directory"]):
        raise ArtefactError("checkpoints", "directory must be an absolute path")
    if document["format"] != CHECKPOINT_FORMAT:
        raise ArtefactError("checkpoints", f"format must be {CHECKPOINT_FORMAT}")


ARTEFACTS = {
    "nccl-conf": (_render_nccl_conf, _validate_nccl_conf),
    "environment": (_render_environment, _validate_environment),
    "cgroup-slice": (_render_cgroup_slice, _validate_cgroup_slice),
    "checkpoints": (_render_checkpoints, _validate_checkpoints),
}
