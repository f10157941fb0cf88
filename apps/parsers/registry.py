"""Tool names → parse functions, content-based tool detection, and the parser for each real-output fixture."""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial
from pathlib import Path

from . import (
    dcgm,
    dcgm_exporter,
    dmesg,
    gpu_burn,
    hpl,
    infiniband,
    ipmi,
    logs,
    nccl_log,
    nccl_tests,
    network,
    nvbandwidth,
    nvidia_smi,
    nvml,
    redfish,
    slurm,
    system,
    timeline,
    torch_bench,
)
from .common import Result, split_lines, strip_ansi

Parser = Callable[[str], Result]

PARSERS: dict[str, Parser] = {
    "nvidia_smi_query": nvidia_smi.parse_query_gpu,
    "nvidia_smi_q": nvidia_smi.parse_query_text,
    "nvidia_smi_q_selected": partial(nvidia_smi.parse_query_text, selected=True),  # -q -i <ids>: a subset of GPUs
    "nvidia_smi_xml": nvidia_smi.parse_query_xml,
    "nvidia_smi_topo": nvidia_smi.parse_topology,
    "nvidia_smi_p2p": nvidia_smi.parse_p2p,
    "nvidia_smi_nvlink": nvidia_smi.parse_nvlink_status,
    "nvidia_smi_dmon": nvidia_smi.parse_dmon,
    "nvidia_smi_table": nvidia_smi.parse_smi_table,
    "nvidia_smi_list": nvidia_smi.parse_gpu_list,
    "nvidia_smi_help_query": nvidia_smi.parse_help_query_gpu,
    "nccl_tests": nccl_tests.parse_nccl_tests,
    "nccl_log": nccl_log.parse_nccl_log,
    "dcgm_diag": dcgm.parse_dcgm_diag,
    "dcgm_discovery": dcgm.parse_dcgm_discovery,
    "dcgm_nvlink": dcgm.parse_dcgm_nvlink,
    "dcgm_exporter": dcgm_exporter.parse_dcgm_exporter,
    "nvbandwidth": nvbandwidth.parse_nvbandwidth,
    "hpl": hpl.parse_hpl,
    "hpl_mxp": hpl.parse_hpl_mxp,
    "ibstat": infiniband.parse_ibstat,
    "ibstatus": infiniband.parse_ibstatus,
    "ibv_devinfo": infiniband.parse_ibv_devinfo,
    "ethtool": network.parse_ethtool,
    "ethtool_driver": network.parse_ethtool_driver,
    "ethtool_stats": network.parse_ethtool_stats,
    "ip_link": network.parse_ip_link,
    "netstat_i": network.parse_netstat_i,
    "mlnx_qos": network.parse_mlnx_qos,
    "ib_write_bw": network.parse_ib_write_bw,
    "lscpu": system.parse_lscpu,
    "numactl": system.parse_numactl,
    "lsblk": system.parse_lsblk,
    "meminfo": system.parse_meminfo,
    "net_mtu_speed": system.parse_net_mtu_speed,
    "ipmitool": ipmi.parse_ipmitool,
    "dcmi_power": ipmi.parse_dcmi_power,
    "ipmi_sel": ipmi.parse_sel_elist,
    "redfish": redfish.parse_redfish,
    "dmesg": dmesg.parse_dmesg,
    "gpu_burn": gpu_burn.parse_gpu_burn,
    "timeline": timeline.parse_timeline,
    "nvml_snapshot": nvml.parse_nvml_snapshot,
    "nvml_timeseries": nvml.parse_nvml_timeseries,
    "torch_benchmarks": torch_bench.parse_torch_benchmarks,
    "sinfo_nodes": slurm.parse_sinfo_nodes,
    "scontrol_nodes": slurm.parse_show_nodes,
    "log": logs.parse_log,
}


class UnknownTool(LookupError):
    """A tool name with no parser."""


def tool_names() -> list[str]:
    return sorted(PARSERS)


def parse(tool: str, text: str) -> Result:
    try:
        parser = PARSERS[tool]
    except KeyError:
        raise UnknownTool(f"unknown tool {tool!r}; known tools: {', '.join(tool_names())}") from None
    return parser(text)


# --- fixtures ---------------------------------------------------------------------------------------------------

# (folder pattern or None for any folder, file-name pattern, tool); the first match wins. Every file under
# tests/fixtures/real/ is parsed: none was found to be unreadable. Notes on the awkward ones:
#   hpl-mxp/*.stderr.txt          holds only scheduler and MPI errors; it parses as an 'interrupted' run.
#   horovod/*.json.txt            is a single metadata event; it parses as an empty, truncated timeline.
#   h200-1gpu/nvidia-smi-nvlink-s is empty (no NVLink in that VM); empty output is a valid "no links" result.
FIXTURE_RULES: tuple[tuple[str | None, str, str], ...] = (
    (None, r"^dcgmi-diag", "dcgm_diag"),
    (None, r"^dcgmi-discovery", "dcgm_discovery"),
    (None, r"^dcgmi-nvlink", "dcgm_nvlink"),
    ("dcgm-exporter", r"", "dcgm_exporter"),
    ("nccl-tests", r"^nccl-(?:warn|info)", "nccl_log"),
    ("nccl-tests", r"", "nccl_tests"),
    ("nvbandwidth", r"", "nvbandwidth"),
    ("hpl-mxp", r"", "hpl_mxp"),
    ("hpl", r"", "hpl"),
    ("ipmi", r"", "ipmitool"),
    ("ipmi-dcmi", r"", "dcmi_power"),
    ("ipmi-sel", r"", "ipmi_sel"),
    ("redfish", r"", "redfish"),
    ("dmesg", r"", "dmesg"),
    ("dmesg-xid", r"^aer-|kmsg", "log"),  # AER with relative stamps and raw /dev/kmsg: no Xid for dmesg to read
    ("dmesg-xid", r"", "dmesg"),
    ("nccl-warn", r"", "nccl_log"),
    ("pytorch-nccl", r"", "log"),  # failure logs of training jobs, schedulers and k8s: read by triage
    ("training-logs", r"", "log"),
    ("slurm", r"^sinfo-N-", "sinfo_nodes"),
    ("slurm", r"^scontrol-show-node", "scontrol_nodes"),
    ("slurm", r"", "log"),
    ("k8s", r"", "log"),
    ("gpu-burn", r"", "gpu_burn"),
    ("horovod", r"", "timeline"),
    (None, r"query-gpu.*\.csv$", "nvidia_smi_query"),
    (None, r"help-query-gpu", "nvidia_smi_help_query"),
    (None, r"\.xml$", "nvidia_smi_xml"),
    (None, r"^(?:nvidia-smi-)?q-i\d", "nvidia_smi_q_selected"),
    (None, r"^(?:nvidia-smi-)?q(?:-|\.txt$)", "nvidia_smi_q"),
    (None, r"topo-m", "nvidia_smi_topo"),
    (None, r"topo-p2p", "nvidia_smi_p2p"),
    (None, r"nvlink-(?:s\b|status)", "nvidia_smi_nvlink"),
    (None, r"dmon", "nvidia_smi_dmon"),
    (None, r"^nvidia-smi-L\.", "nvidia_smi_list"),
    (None, r"^nvidia-smi(?:-default.*)?\.txt$", "nvidia_smi_table"),
    (None, r"^nccl-tests", "nccl_tests"),
    (None, r"^ibstatus|gpud-ibstatus", "ibstatus"),
    (None, r"^ibstat|gpud-ibstat", "ibstat"),
    (None, r"^ibv_devinfo", "ibv_devinfo"),
    (None, r"^ethtool-i-", "ethtool_driver"),
    (None, r"^ethtool-S-", "ethtool_stats"),
    (None, r"^ethtool", "ethtool"),
    (None, r"^ip-(?:s-)?(?:j-)?link", "ip_link"),
    (None, r"^netstat-i", "netstat_i"),
    (None, r"mlnx_qos", "mlnx_qos"),
    (None, r"^ib_write_bw", "ib_write_bw"),
    (None, r"^lscpu", "lscpu"),
    (None, r"^numactl", "numactl"),
    (None, r"^lsblk", "lsblk"),
    (None, r"meminfo", "meminfo"),
    (None, r"mtu-speed", "net_mtu_speed"),
    (None, r"^nvml-snapshot", "nvml_snapshot"),
    (None, r"^nvml-timeseries", "nvml_timeseries"),
    (None, r"^node-benchmarks-torch", "torch_benchmarks"),
    (None, r"profiler|timeline|trace", "timeline"),
    (None, r"hpl-mxp|hpl_mxp", "hpl_mxp"),
    (None, r"^hpl", "hpl"),
    (None, r"^dmesg|\bxid\b", "dmesg"),
)


def _match_rules(path: Path) -> str | None:
    folder, name = path.parent.name, path.name
    for folder_pattern, name_pattern, tool in FIXTURE_RULES:
        if folder_pattern is not None and folder != folder_pattern:
            continue
        if re.search(name_pattern, name):
            return tool
    return None


def tool_for_fixture(path: str | Path) -> str:
    """The parser for a file under tests/fixtures/real/, from its folder and file name."""
    tool = _match_rules(Path(path))
    if tool is None:
        raise LookupError(f"no parser is mapped to fixture {path}; add a rule to FIXTURE_RULES")
    return tool


# --- detection --------------------------------------------------------------------------------------------------

JSON_SIGNATURES = (
    ('"DCGM GPU Diagnostic"', "dcgm_diag"),
    ('"nvbandwidth"', "nvbandwidth"),
    ('"traceEvents"', "timeline"),
    ('"ph"', "timeline"),
    ('"blockdevices"', "lsblk"),
    ('"lscpu"', "lscpu"),
    ('"ifname"', "ip_link"),
    ('"@odata', "redfish"),
    ('"gemm_tflops"', "torch_benchmarks"),
    ('"nvml"', "nvml_snapshot"),
    ('"power_mw"', "nvml_timeseries"),
    ('"nccl_version"', "nccl_tests"),
)

# (pattern searched in the whole text with ^/$ at line ends, tool). Order matters where one tool's output embeds
# another's lines: nccl-tests output carries NCCL INFO lines, so nccl_tests is tried before nccl_log.
TEXT_SIGNATURES = (
    (r"\ANodeName=\S+ ", "scontrol_nodes"),
    (r"NVSMI LOG|^Attached GPUs\s+:|^GPU [0-9A-Fa-f]+:[0-9A-Fa-f]+:[0-9A-Fa-f]+\.[0-9A-Fa-f]\s*$", "nvidia_smi_q"),
    (r"NVIDIA-SMI\s+\S+\s+Driver Version", "nvidia_smi_table"),
    (r'List of valid properties to query for the switch "--query-gpu"', "nvidia_smi_help_query"),
    # topo -p2p: its legend, or a row of nothing but peer-to-peer status codes (a topo -m row has SYS, NV#, CPUs)
    (
        r"^\s+OK\s+= Status Ok$|^\s*GPU\d+\s+(?:X|OK|CNS|GNS|TNS|NS|DR|U)(?:[ \t]+(?:X|OK|CNS|GNS|TNS|NS|DR|U))+\s*$",
        "nvidia_smi_p2p",
    ),
    (r"^\s*GPU0\s.*(?:CPU Affinity|NIC0|GPU1)", "nvidia_smi_topo"),
    # dmon's header, also with the -o D / -o T / -o DT columns before 'gpu' ('#Time  gpu ...' over '#HH:MM:SS  Idx')
    (r"^#\s*(?:(?:Date|Time)\s+){0,2}gpu\s+\w+.*\n#\s*(?:\S+\s+){0,2}Idx\b", "nvidia_smi_dmon"),
    (
        r"^index,|^uuid,|^name,|^pci\.bus_id,|(?:^|, )memory\.total \[MiB\]|^\d+, GPU-[0-9a-fA-F-]+, "
        r"|^timestamp, |^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d+, ",
        "nvidia_smi_query",
    ),
    (r"nvbandwidth Version|^Running \w+_(?:ce|sm)\.$", "nvbandwidth"),
    (r"HPL-MxP", "hpl_mxp"),
    (r"HPLinpack|HPL-NVIDIA", "hpl"),
    (r"#\s*nThread \d|# Collective test starting|Avg bus bandwidth\s*:|#\s+size\s+count\s+type", "nccl_tests"),
    (r"NCCL (?:INFO|WARN) ", "nccl_log"),
    (r"\|\s*Diagnostic\s*\|\s*Result\s*\|", "dcgm_diag"),
    (r"^\d+ GPUs? found\.", "dcgm_discovery"),
    (r"NvLink Link Status", "dcgm_nvlink"),
    (r"^(?:# (?:HELP|TYPE) [A-Za-z_:]\w* |DCGM_FI_\w+[{ ])", "dcgm_exporter"),
    (r"Infiniband device '", "ibstatus"),
    (r"^CA '", "ibstat"),
    (r"^hca_id:", "ibv_devinfo"),
    (r"^Settings for \S+:", "ethtool"),
    (r"^NIC statistics:", "ethtool_stats"),
    (r"^driver: .*\n(?:.*\n)*?bus-info:", "ethtool_driver"),
    (r"^\d+: [^:\s]+: <", "ip_link"),
    (r"Kernel Interface table|^Iface\s+MTU", "netstat_i"),
    (r"PFC configuration|Priority trust state", "mlnx_qos"),
    (r"BW Test|#bytes\s+#iterations", "ib_write_bw"),
    (r"^Architecture:.*\n(?:.*\n)*?CPU\(s\):", "lscpu"),
    (r"^available: \d+ nodes", "numactl"),
    (r"^MemTotal:", "meminfo"),
    (r"^GPU \d+: .*\n\s+Link \d+:", "nvidia_smi_nvlink"),
    (
        r"NVRM: Xid|^\[\s*\d+\.\d+\] |^\[\w{3} \w{3} +\d+ [\d:]+ \d{4}\] "
        r"|^\d{4}-\d\d-\d\dT[\d:]+,\d{6}[+-]\d\d:\d\d ",  # dmesg, -T, --time-format iso
        "dmesg",
    ),
    (r"proc'd:|^Tested \d+ GPUs?:|Burning for \d+ seconds", "gpu_burn"),
    (r"^\s*Instantaneous power reading:|^Current Power\s+: \d+ Watts", "dcmi_power"),
    (
        r"^\s*[0-9a-fA-F]{1,4} \| (?:\d\d/\d\d/\d{4}|Pre-Init) \| [^|\n]+\|[^|\n]+\|[^|\n]+\| (?:De)?[Aa]sserted",
        "ipmi_sel",
    ),
)
# Outputs recognised by every non-blank line having one shape (checked line by line: no regex backtracking).
LINE_SIGNATURES = (
    (re.compile(r"^[^|\s]+\|[a-z_]+[*~#!%$@^-]*\|(?:Unknown|None|\d{4}-\d\d-\d\dT[\d:]+)\|[^|]*\|.*$"), "sinfo_nodes"),
    (re.compile(r"^GPU \d+: .+\(UUID: \S+\)$|^\s+MIG \S+\s+Device\s+\d+: \(UUID: \S+\)$"), "nvidia_smi_list"),
    (re.compile(r"^\S+ \d+(?: -?\d+)?$"), "net_mtu_speed"),
)
COMPILED_TEXT_SIGNATURES = tuple((re.compile(pattern, re.MULTILINE), tool) for pattern, tool in TEXT_SIGNATURES)
IPMI_PIPES = {2, 4, 9}


# Tools that content alone cannot tell apart from another (`-q -i 0` prints what `-q` cut after one GPU prints):
# detection names the general one.
DETECTED_AS = {"nvidia_smi_q_selected": "nvidia_smi_q"}


def detect_tool(text: str, filename: str | None = None) -> str | None:
    """The tool that most likely produced ``text``, or None. The file name is consulted only when the content is not
    recognised (a job's stderr, for instance, carries no tool banner)."""
    stripped = text.strip()
    if not stripped:
        return None
    tool = _detect_structured(stripped) or _detect_text(text)
    if tool is None and filename:
        tool = _match_rules(Path(filename))
    return tool


def _detect_structured(stripped: str) -> str | None:
    if stripped.startswith(("<?xml", "<nvidia_smi_log")):
        return "nvidia_smi_xml"
    first_lines = split_lines(stripped)[:5]
    if not any(line.strip().startswith(("{", "[")) for line in first_lines):
        return None
    head = stripped[:200000]
    return next((tool for signature, tool in JSON_SIGNATURES if signature in head), None)


def _detect_text(text: str) -> str | None:
    cleaned = "\n".join(split_lines(strip_ansi(text)))
    for pattern, tool in COMPILED_TEXT_SIGNATURES:
        if pattern.search(cleaned):
            return tool
    lines = [line.rstrip() for line in split_lines(cleaned) if line.strip()]
    for pattern, tool in LINE_SIGNATURES:
        if all(pattern.match(line) for line in lines):
            return tool
    if lines[0].count("|") in IPMI_PIPES and not lines[0].lstrip().startswith(("|", "+")):
        return "ipmitool"
    return None
