"""Log triage rules: a log's text → the problems it shows, each citing the lines it comes from.

Pure functions shared by the triage page, ``manage.py triage`` and (later) the runbooks. A rule fires only on a line
that states the problem; a finding carries those lines (numbers and text) and where the log says it happened (rank,
node, GPU, NIC, Xid). Lines of one problem at one place are one finding. A log in which no rule fires gives no
findings: nothing is guessed from what is missing.

``PROBLEMS`` lists every problem key a rule can emit; ``apps.diagnosis.choices.Problem`` gives each its advice.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from .common import Result
from .infiniband import normalise_physical_state, normalise_state
from .logs import LogLine, read_file_lines
from .xid import xid_info

MAX_DETAIL = 240  # characters of a quoted message
MAX_CITED_LINES = 50  # per finding; ``count`` keeps the full number of lines that matched

# Status codes of ibv_wc_status (rdma-core verbs.h) that NCCL's NET/IB completion errors print.
IBV_WC_STATUS = {
    1: "IBV_WC_LOC_LEN_ERR, local length error",
    2: "IBV_WC_LOC_QP_OP_ERR, local QP operation error",
    4: "IBV_WC_LOC_PROT_ERR, local protection error",
    5: "IBV_WC_WR_FLUSH_ERR, work request flushed after an earlier error",
    8: "IBV_WC_LOC_ACCESS_ERR, local access error",
    9: "IBV_WC_REM_INV_REQ_ERR, remote invalid request",
    10: "IBV_WC_REM_ACCESS_ERR, remote access error",
    11: "IBV_WC_REM_OP_ERR, remote operation error",
    12: "IBV_WC_RETRY_EXC_ERR, transport retry counter exceeded: the peer did not acknowledge",
    13: "IBV_WC_RNR_RETRY_EXC_ERR, receiver-not-ready retry counter exceeded",
    20: "IBV_WC_RESP_TIMEOUT_ERR, response timeout",
    21: "IBV_WC_GENERAL_ERR, general error",
}

IB_VENDOR_ERR = re.compile(r"vendor err (\d+)")
IB_HCA = re.compile(r"\bhca (\w+)")

SIGNALS = {6: "SIGABRT", 7: "SIGBUS", 9: "SIGKILL", 11: "SIGSEGV", 15: "SIGTERM"}


@dataclass
class Finding(Result):
    """One problem at one place, with the lines that show it (``excerpt[i]`` is line ``lines[i]``)."""

    problem: str
    lines: list[int]
    excerpt: list[str]
    detail: str
    rank: int | None = None
    node: str | None = None
    gpu: str | None = None
    nic: str | None = None
    xid: int | None = None
    peer: str | None = None
    device: str | None = None  # a PCI device that is not known to be a GPU (a PCIe root port)
    ranks: list[int] = field(default_factory=list)  # the ranks a collective's finding names (a desync's lagging ones)
    count: int = 0

    def cite(self, entry: LogLine) -> None:
        self.count += 1
        if entry.line not in self.lines and len(self.lines) < MAX_CITED_LINES:
            self.lines.append(entry.line)
            self.excerpt.append(entry.text)


@dataclass
class TriageReport(Result):
    findings: list[Finding]
    lines: int  # non-blank lines read
    recognised: bool = field(init=False)

    def __post_init__(self) -> None:
        self.recognised = bool(self.findings)


# --- rules ------------------------------------------------------------------------------------------------------

Where = dict[str, object]


@dataclass(frozen=True)
class Rule:
    """``pattern`` searched in a line's message; named groups rank/node/gpu/nic/xid/peer/device say where;
    ``detail`` is a template over the groups, or a function of the match. A ``supports`` rule never starts a
    finding: it adds its line to an open finding of one of those problems at the same rank and node."""

    problem: str
    pattern: re.Pattern
    detail: str | Callable[[re.Match], str]
    supports: tuple[str, ...] = ()
    in_traceback: bool = False  # fires only on the frames of a Python traceback


def _rule(
    problem: str,
    pattern: str,
    detail: str | Callable[[re.Match], str] = "",
    supports: tuple[str, ...] = (),
    in_traceback: bool = False,
):
    """A rule; an empty ``detail`` quotes the line's message."""
    return Rule(problem, re.compile(pattern, re.IGNORECASE), detail, supports, in_traceback)


def _ib_completion(match: re.Match) -> str:
    status = int(match["status"])
    meaning = IBV_WC_STATUS.get(status, "status not in ibv_wc_status")
    vendor_match = match["vendor"] or ((found := IB_VENDOR_ERR.search(match.string)) and found[1])
    vendor = f", vendor err {vendor_match}" if vendor_match else ""
    return f"NET/IB completion error, status {status} ({meaning}){vendor}"


# errno values aws-ofi-nccl prints as 'RC: N' (libfabric returns them negated).
OFI_ERRNO = {
    12: "ENOMEM: the locked-memory limit (ulimit -l) or the NIC's memory-registration resources ran out",
    22: "EINVAL: the provider refused the buffer (libfabric/EFA installer and CUDA memory-ops settings)",
}


def _ofi_failure(match: re.Match) -> str:
    code = abs(int(match["rc"]))
    meaning = OFI_ERRNO.get(code, match["why"].strip() or "errno not explained")
    return f"aws-ofi-nccl: {match['what']}: RC {match['rc']} ({meaning})"


def _gsp_failure(match: re.Match) -> str:
    rm_gpu = f" (driver's GPU{match['rm_gpu']})" if match["rm_gpu"] else ""
    if match["init"]:
        return f"the driver could not initialise the GPU{rm_gpu}: RmInitAdapter failed ({match['init']})"
    return f"the GPU's firmware (GSP) stopped answering the driver{rm_gpu}: {match['what']}"


def _unkillable(match: re.Match) -> str:
    groups = match.groupdict()
    if groups.get("step"):
        return (
            f"step {groups['step']} on {groups['node']} did not end after SIGKILL: slurmd gives up "
            "(UnkillableStepTimeout) and the node is drained with 'Kill task failed'"
        )
    where = f" on {groups['node']}" if groups.get("node") else ""
    return f"Kill task failed{where}: a job's processes did not die after SIGKILL, so Slurm drains the node"


def _xid_detail(match: re.Match) -> str:
    number = int(match["xid"])
    info = xid_info(number)
    said = (match["said"] or "").strip()
    name = info.name if info else "not in Rackpilot's Xid catalogue"
    return f"Xid {number} ({name})" + (f": {said}" if said else "")


def _storage_stall(match: re.Match) -> str:
    if match["server"] or match["nid"]:
        return f"storage server {match['server'] or match['nid']} not responding"
    return f"task {match['task']}:{match['task_pid']} blocked on I/O for more than {match['seconds']} s"


def _watchdog(match: re.Match) -> str:
    return (
        f"{match['op']} (SeqNum {match['seq']}) ran {match['ran']} ms, past its {match['timeout']} ms timeout"
        if match["op"]
        else match[0]
    )


NCCL = ("nccl_watchdog_timeout", "nccl_remote_error", "nccl_ib_error", "nccl_socket_error")
NCCL_ALL = NCCL + ("nccl_internal_error", "nccl_system_error", "nccl_invalid_usage", "cuda_error")

# First match wins for a line, so the specific wording comes before the general one.
RULES: tuple[Rule, ...] = (
    # Kernel Xid lines first: their messages quote other problems ("Row Remapper: ...", "uncorrectable ECC").
    _rule(
        "xid",
        r"NVRM: Xid \((?:PCI:)?(?P<gpu>[0-9A-Fa-f:.]+)\): (?P<xid>\d+)(?:, pid=[^,]*)?(?:, name=[^,]*)?"
        r"(?:, (?P<said>.*))?",
        _xid_detail,
    ),
    _rule(
        "xid",
        r"XidCriticalError: Xid=(?P<xid>\d+) on Device=(?P<gpu>\S+?),(?P<said>.*)",
        _xid_detail,
    ),
    _rule("xid", r"device marked unhealthy: (?P<gpu>GPU-[0-9a-fA-F-]+)", supports=("xid", "gpu_fell_off_bus")),
    # GPU firmware (GSP) that stops answering prints no Xid on many drivers; 'GPU0' is the driver's own numbering.
    _rule(
        "gpu_firmware_failure",
        r"NVRM: (?:GPU(?P<rm_gpu>\d+) |GPU (?P<gpu>[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d): )?(?:\S+: )*"
        r"(?:(?P<what>_kgspIsHeartbeatTimedOut: Heartbeat timed out|GSP RM heartbeat timed out"
        r"|Timeout waiting for RPC from GSP!?(?: Expected function \d+ \(\w+\))?|rpcRecvPoll timedout for fn \d+"
        r"|Assertion failed: Back to back GSP RPC timeout detected! GPU marked for reset)"
        r"|RmInitAdapter failed! \((?P<init>[^)]+)\))",
        _gsp_failure,
    ),
    _rule(
        "gpu_reset_required",
        r"\bNV_ERR_RESET_REQUIRED\b",
        "the driver refuses work on the GPU until it is reset (NV_ERR_RESET_REQUIRED, status 0x62)",
    ),
    # Memory: ECC and OOM are named before CUDA errors ("CUDA error: out of memory", "uncorrectable ECC error").
    _rule(
        "ecc_uncorrectable",
        r"uncorrectable ECC errors? (?:was )?(?:encountered|detected|occurred)|(?-i:Double Bit ECC Error)"
        r"|cudaErrorECCUncorrectable",
    ),
    _rule("row_remap", r"Row Remapper: |row remapping (?:failed|is pending)"),
    _rule(
        "oom",
        r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory|out of memory: Killed process (?P<pid>\d+)"
        r"|oom-kill:|Memory cgroup out of memory|Test CUDA failure \S+ 'out of memory'"
        r"|memory allocation failed with OOM on device \d+",
    ),
    _rule("disk_full", r"No space left on device|Disk quota exceeded|\bENOSPC\b|\bEDQUOT\b|\[Errno 28\]"),
    # The kernel's words for storage that stopped answering: the NFS client, Lustre's client, the hung-task watchdog.
    _rule(
        "storage_not_responding",
        r"nfs: server (?P<server>\S+) not responding|Lustre: \S+: Connection to \S+ \(at (?P<nid>[^)]+)\) was lost"
        r"|INFO: task (?P<task>.+?):(?P<task_pid>\d+) blocked for more than (?P<seconds>\d+) seconds",
        _storage_stall,
    ),
    # NCCL and PyTorch ProcessGroupNCCL.
    _rule(
        "nccl_watchdog_timeout",
        r"Watchdog caught collective operation timeout: WorkNCCL\(SeqNum=(?P<seq>\d+), OpType=(?P<op>\w+).*?"
        r"Timeout\(ms\)=(?P<timeout>\d+)\) ran for (?P<ran>\d+) milliseconds",
        _watchdog,
    ),
    _rule("nccl_watchdog_timeout", r"Timeout at NCCL work: (?P<seq>\d+)", "timeout at NCCL work {seq}"),
    _rule(
        "nccl_watchdog_timeout",
        r"Heartbeat monitor timed out|First PG on this rank that detected no heartbeat",
        "the watchdog stopped beating (heartbeat monitor timed out): a collective or CUDA call hangs",
    ),
    _rule(
        "nccl_watchdog_timeout",
        r"dump signal due to a collective timeout from (?:this local rank|\s*rank (?P<rank>\d+))",
        "collective timeout (flight-recorder dump signal)",
    ),
    _rule(
        "nccl_watchdog_timeout",
        r"Exception \(either an error or timeout\) detected by watchdog|Some NCCL operations have failed or timed "
        r"out|taking the entire process down",
        supports=NCCL_ALL,
    ),
    _rule(
        "nccl_ib_error",
        r"NET/IB ?: Got completion (?:from peer (?P<peer>\S+?)(?:%(?P<nic>\w+))?(?:<\d+>)? )?with "
        r"(?:status=|error )(?P<status>\d+)(?:.*?\bvendor err (?P<vendor>\d+))?",
        _ib_completion,
    ),
    _rule("nccl_ib_error", r"Call to (?P<call>ibv_\w+) failed(?: with error (?P<why>.*))?", "{call} failed: {why}"),
    _rule(
        "nccl_ib_error",
        r"IBV_WC_RETRY_EXC_ERR|transport retry counter exceeded|retry exceeded",
        "IB transport retry counter exceeded: the peer did not acknowledge",
    ),
    _rule(
        "nccl_socket_error",
        r"socketStartConnect: Connect to (?P<peer>\S+?)(?:<\d+>)? failed : (?P<why>.*)",
        "connect to {peer} failed: {why}",
    ),
    _rule("nccl_socket_error", r"Call to connect failed : (?P<why>.*)", "socket connect failed: {why}"),
    _rule(
        "nccl_socket_error",
        r"client socket has timed out after (?P<after>\S+) while trying to connect to "
        r"\((?P<peer>[^,)]+), ?(?P<port>\d+)\)",
        "connect to the c10d store at {peer}:{port} timed out after {after}",
    ),
    _rule(
        "nccl_socket_error",
        r"no socket interface found|No usable listening interface"
        r"|(?:NCCL|bootstrap|socket).*\bconnect(?:ion)? (?:timed out|refused)",
    ),
    _rule(
        "nccl_remote_error",
        r"recvValue failed on SocketImpl\(.*remote=\[(?P<peer>[^\]]+)\]:\d+\): Connection reset by peer",
        "TCPStore connection to {peer} reset by peer",
    ),
    _rule(
        "nccl_remote_error",
        r"Connection closed by remote peer(?: (?P<peer>[^\s<]+)(?:<\d+>)?)?$|(?:TCPStore|c10d|NCCL|socket).*"
        r"Connection reset by peer|remote process exited or there was a network error|ncclRemoteError",
    ),
    _rule("nccl_remote_error", r"Socket recv failed while polling", supports=("nccl_remote_error",)),
    _rule("nccl_remote_error", r"NET/OFI .*completed with error", supports=("nccl_remote_error",)),
    _rule(
        "nccl_system_error",
        r"NET/OFI (?P<what>Unable to register memory \(type = \d+\) for device \d+|Couldn't enable endpoint)\. "
        r"RC: (?P<rc>-?\d+), (?:Error|ERROR): (?P<why>.*)",
        _ofi_failure,
    ),
    _rule("nccl_internal_error", r"ncclInternalError|, internal error, NCCL version|internal error - please"),
    _rule("nccl_system_error", r"ncclSystemError|unhandled system error|, system error, NCCL version"),
    _rule("nccl_invalid_usage", r"ncclInvalidUsage|, invalid usage, NCCL version"),
    # CUDA (after OOM and ECC). nccl-tests names the host in front: 'node0: Test CUDA failure common.cu:389 ...'.
    _rule(
        "cuda_error",
        r"(?:^|\s)(?P<node>[\w.\-]+): Test CUDA failure \S+ '(?P<what>[^']+)'",
        "CUDA error: {what}",
    ),
    _rule(
        "cuda_error",
        r"(?P<what>an illegal memory access was encountered|unspecified launch failure|device-side assert triggered"
        r"|misaligned address|system not yet initialized|unhandled cuda error|CUDA error: [^.]+)",
        "CUDA error: {what}",
    ),
    # Kernel: Xid, fallen off the bus, PCIe AER.
    _rule("gpu_fell_off_bus", r"fallen off the bus", "the GPU has fallen off the bus (no longer answers on PCIe)"),
    _rule(
        "pcie_aer",
        r"^(?P<driver>[\w\-]+) (?P<pci>[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.\d): (?:AER: (?P<what>.*)|(?P<bus>PCIe Bus "
        r"Error: .*))",
        lambda m: f"{m['driver']} {m['pci']}: {m['what'] or m['bus']}",
    ),
    _rule(
        "pcie_aer",
        r"^(?P<driver>[\w\-]+) (?P<pci>[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.\d): +(?:device \[[0-9a-f:]+\] error "
        r"status/mask|\[\s*\d+\] \w+)",
        supports=("pcie_aer",),
    ),
    # Checkpoints and training.
    _rule(
        "checkpoint_corrupt",
        r"PytorchStreamReader failed reading (?:zip archive|file)|failed finding central directory"
        r"|_pickle\.UnpicklingError|SafetensorError: Error while deserializing|invalid load key",
    ),
    _rule(
        "checkpoint_missing",
        r"could not find the metadata file (?P<path>\S+)",
        "no checkpoint tracker file at {path}",
    ),
    _rule(
        "checkpoint_missing",
        r"will not load any checkpoints and will start from random",
        supports=("checkpoint_missing",),
    ),
    _rule(
        "checkpoint_save_failed",
        r"^File \"[^\"]+\", line \d+, in (?P<function>_?save_checkpoint\w*)$"
        r"|^(?:[\w.]+\.)?(?P<call>_?save_checkpoint\w*)\(",
        lambda m: f"an exception went up through {m['function'] or m['call']}: saving a checkpoint failed",
        in_traceback=True,
    ),
    _rule("training_crashed", r"Exception during training"),
    # torchrun / elastic agent.
    _rule(
        "worker_failed",
        r"failed \(exitcode: (?P<exit>-?\d+)\) local_rank: (?P<local>\d+) \(pid: (?P<pid>\d+)\)",
        lambda m: f"worker local_rank {m['local']} (pid {m['pid']}) exited with {_exit_code(m['exit'])}",
    ),
    _rule(
        "worker_failed",
        r"exits with return code = (?P<exit>-?[1-9]\d*)",
        lambda m: f"a worker exited with {_exit_code(m['exit'])}",
    ),
    # Schedulers.
    _rule(
        "gpu_count_mismatch",
        r"(?:node (?P<node>\S+) .*)?gres/gpu count reported lower than configured \((?P<got>\d+) < (?P<want>\d+)\)",
        "the node reports a GPU count of {got}, {want} configured",
    ),
    _rule(
        "gpu_count_mismatch",
        r"gres/gpu: Count changed on node (?P<node>\S+) \((?P<was>\d+) != (?P<now>\d+)\)",
        "GPU count changed on {node}: {was} configured, {now} found",
    ),
    _rule(
        "slurm_unkillable_step",
        r"STEP (?P<step>\S+) STEPD TERMINATED ON (?P<node>\S+) AT \S+ DUE TO JOB NOT ENDING WITH SIGNALS",
        _unkillable,
    ),
    _rule(  # sinfo -R: REASON USER TIMESTAMP NODELIST
        "slurm_unkillable_step",
        r"^Kill task failed\s+\S+\s+\d{4}-\d\d-\d\dT[\d:]+\s+(?P<node>\S+)$",
        _unkillable,
    ),
    _rule("slurm_unkillable_step", r"(?:on node\(s\)=(?P<node>[^:\s]+): )?\bKill task failed\b", _unkillable),
    _rule("node_drained", r"node (?P<node>\S+) state set to DRAIN", "{node} drained"),
    _rule("node_drained", r"\bState=\S*DRAIN\S*", "node state {0}"),
)

PROBLEMS: tuple[str, ...] = tuple(dict.fromkeys(rule.problem for rule in RULES)) + (
    "collective_not_joined",
    "gpu_clocks_throttled",
    "ib_port_down",
)

WHERE_GROUPS = ("rank", "node", "gpu", "nic", "xid", "peer", "device")


def _exit_code(value: str) -> str:
    code = int(value)
    if code < 0 and -code in SIGNALS:
        return f"exit code {code} (signal {-code}, {SIGNALS[-code]})"
    return f"exit code {code}"


# --- the engine -------------------------------------------------------------------------------------------------


def triage(text: str) -> TriageReport:
    """Every finding in ``text``, in the order of their first line."""
    entries = read_file_lines(text)
    findings: dict[tuple, Finding] = {}
    context_node: str | None = None  # scontrol's NodeName= names the node its block describes
    in_traceback = False  # between 'Traceback (most recent call last):' and the exception line
    wrapped: set[int] = set()  # continuation lines already read with the line they continue
    for index, entry in enumerate(entries):
        if index in wrapped:
            continue
        if match := SCONTROL_NODE.match(entry.message):
            context_node = match[1]
        if entry.message.startswith("Traceback (most recent call last)"):
            in_traceback = True
        elif in_traceback and not entry.text[:1].isspace():
            in_traceback = False
        rule, match = _first_rule(entry.message, in_traceback)
        cited = [entry]
        if (tail := _continuation(entries, index, in_traceback)) is not None:
            joined_rule, joined = _first_rule(f"{entry.message} {tail.message}", in_traceback)
            if _reads_more(match, joined, len(entry.message)) and rule in (None, joined_rule):
                rule, match, cited = joined_rule, joined, [entry, tail]
                wrapped.add(index + 1)
        if rule is None:
            continue
        where = _where(rule, match, entry, context_node)
        for line in cited:
            if rule.supports:
                _support(findings, rule.supports, where, line)
            else:
                _add(findings, rule.problem, where, _detail(rule, match), line)
        if rule.problem == "gpu_fell_off_bus" and not rule.supports:
            _banner(findings[_key(rule.problem, where)], entries, index)
        if len(cited) > 1 and not rule.supports:
            findings[_key(rule.problem, where)].count -= 1  # one message wrapped onto two lines is one occurrence
    _socket_interfaces(findings, entries)
    blocks = (
        _elastic_summaries(entries)
        + _flight_recorder(entries)
        + _desync_report(entries)
        + _nvidia_smi_q(entries)
        + _ib_ports(entries)
    )
    for finding in blocks:
        _merge_block(findings, finding, entries)
    ordered = sorted(findings.values(), key=lambda finding: finding.lines[0])
    for finding in ordered:
        order = sorted(range(len(finding.lines)), key=finding.lines.__getitem__)
        finding.lines = [finding.lines[i] for i in order]
        finding.excerpt = [finding.excerpt[i] for i in order]
    return TriageReport(findings=ordered, lines=len({entry.line for entry in entries}))


def _merge_block(findings: dict[tuple, Finding], block: Finding, entries: list[LogLine]) -> None:
    """A torchrun summary cut before its root cause says no more than the agent's 'failed (exitcode ...)' line: its
    lines join that finding. Otherwise the block is a finding of its own."""
    if block.problem == "worker_failed" and block.rank is None and block.node is None:
        agent = next((f for f in findings.values() if f.problem == "worker_failed" and f.rank is None), None)
        if agent is not None:
            by_number = {entry.line: entry for entry in entries}
            for number in block.lines:
                agent.cite(by_number[number])
            agent.count -= len(block.lines)
            return
    findings[(block.problem, block.lines[0])] = block


SCONTROL_NODE = re.compile(r"^NodeName=(\S+)")
NVIDIA_GPU_BANNER = re.compile(r"NVRM: The NVIDIA GPU (?P<gpu>[0-9A-Fa-f:.]+)")


def _first_rule(message: str, in_traceback: bool) -> tuple[Rule | None, re.Match | None]:
    """The first rule whose pattern is in ``message`` (rules for traceback frames only inside a traceback)."""
    for rule in RULES:
        if rule.in_traceback and not in_traceback:
            continue
        if match := rule.pattern.search(message):
            return rule, match
    return None, None


def _continuation(entries: list[LogLine], index: int, in_traceback: bool) -> LogLine | None:
    """The next line when it continues this one: a long message wrapped by a terminal, a pager or an issue
    tracker goes on in a line without the launcher, rank or NCCL prefixes its first line has, and says nothing a
    rule recognises on its own."""
    if index + 1 >= len(entries):
        return None
    entry, following = entries[index], entries[index + 1]
    prefixed = entry.message != entry.text.strip()
    bare = following.message == following.text and not following.text[:1].isspace()
    if following.line != entry.line + 1 or not prefixed or not bare:
        return None
    return following if _first_rule(following.message, in_traceback)[0] is None else None


def _reads_more(alone: re.Match | None, joined: re.Match | None, length: int) -> bool:
    """True when the line joined with its continuation says more than the line alone: a rule matches only with
    the continuation, or the continuation fills a part the line left empty (a wrapped NET/IB warning's vendor error).
    A trailing catch-all group ('failed : (?P<why>.*)') taking the next line in is not reading more."""
    if joined is None or joined.end() <= length:
        return False
    if alone is None:
        return True
    filled = {name for name, value in joined.groupdict().items() if value is not None}
    return filled > {name for name, value in alone.groupdict().items() if value is not None}


# The CUDA device an out-of-memory message names: '(GPU 3; ...)', 'GPU 3 has a total capacity of' (older
# releases spell it 'capacty'), the caching allocator's 'OOM on device 3'.
OOM_DEVICE = re.compile(r"\(GPU (\d+);|\bGPU (\d+) has a total capac|\bOOM on device (\d+)")


def _where(rule: Rule, match: re.Match, entry: LogLine, context_node: str | None) -> Where:
    groups = {name: value for name, value in match.groupdict().items() if value}
    where: Where = {"rank": entry.rank, "node": entry.node or context_node, "gpu": entry.gpu}
    for name in WHERE_GROUPS:
        if name in groups:
            where[name] = int(groups[name]) if name in ("rank", "xid") else groups[name]
    if isinstance(peer := where.get("peer"), str) and "%" in peer:  # fe80::…%ib1: the scope is the local interface
        where["peer"], scope = peer.split("%", 1)
        where["nic"] = where.get("nic") or scope
    if rule.problem == "oom" and (device := OOM_DEVICE.search(match.string)):
        where["gpu"] = next(number for number in device.groups() if number)
    if rule.problem == "nccl_ib_error" and (hca := IB_HCA.search(match.string)):
        where["nic"] = hca[1]
    if rule.problem == "pcie_aer":  # the device a PCIe error names is a GPU only when the nvidia driver owns it
        where["gpu"] = groups["pci"] if groups.get("driver") == "nvidia" else None
        where["device"] = None if groups.get("driver") == "nvidia" else groups.get("pci")
    if rule.problem == "xid" and where.get("xid") == 79:
        where["problem"] = "gpu_fell_off_bus"
    return where


def _key(problem: str, where: Where) -> tuple:
    return (where.get("problem", problem),) + tuple(where.get(name) for name in WHERE_GROUPS if name != "peer")


def _detail(rule: Rule, match: re.Match) -> str:
    if callable(rule.detail):
        return rule.detail(match)
    if not rule.detail:
        message = match.string
        return message if len(message) <= MAX_DETAIL else message[: MAX_DETAIL - 1] + "…"
    values = {name: value or "" for name, value in match.groupdict().items()}
    return rule.detail.format(match[0], **values).strip()


def _add(findings: dict[tuple, Finding], problem: str, where: Where, detail: str, entry: LogLine) -> None:
    key = _key(problem, where)
    finding = findings.get(key)
    if finding is None:
        location = {name: where.get(name) for name in WHERE_GROUPS}
        finding = findings[key] = Finding(
            problem=str(where.get("problem", problem)), lines=[], excerpt=[], detail=detail, **location
        )
    elif problem == "pcie_aer" and "Fatal" in detail and "Fatal" not in finding.detail:
        finding.detail = detail  # the fatal error says more than the recovery lines around it
    finding.cite(entry)


def _support(findings: dict[tuple, Finding], problems: tuple[str, ...], where: Where, entry: LogLine) -> None:
    """Add the line to the newest open finding of one of ``problems`` at the same rank and node (and GPU when the
    line names one); a supporting line with no such finding is not evidence of anything by itself."""
    for finding in reversed(list(findings.values())):
        if finding.problem not in problems or finding.rank != where.get("rank"):
            continue
        if where.get("node") and finding.node and finding.node != where.get("node"):
            continue
        for name in ("gpu", "device"):
            if where.get(name) and getattr(finding, name) not in (None, where.get(name)):
                break
        else:
            finding.cite(entry)
            return


def _banner(finding: Finding, entries: list[LogLine], index: int) -> None:
    """The driver's 'fallen off the bus' banner names the GPU a few lines up ('NVRM: The NVIDIA GPU 0000:b3:00.0')."""
    for back in range(index - 1, max(index - 4, -1), -1):
        if match := NVIDIA_GPU_BANNER.search(entries[back].message):
            finding.gpu = finding.gpu or match["gpu"]
            for entry in entries[back:index]:
                finding.cite(entry)
                finding.count -= 1  # continuation lines of one message are not further occurrences
            return


# --- blocks that span lines -------------------------------------------------------------------------------------

ELASTIC_TITLE = re.compile(r"^(?P<script>\S.*) FAILED$")
ELASTIC_FIELD = re.compile(r"^(?P<key>time|host|rank|exitcode|error_file|traceback)\s*: (?P<value>.*)$")
ELASTIC_RANK = re.compile(r"^(?P<rank>\d+) \(local_rank: (?P<local>\d+)\)")
ELASTIC_EXIT = re.compile(r"^(?P<exit>-?\d+) \(pid: (?P<pid>\d+)\)")


def _elastic_summaries(entries: list[LogLine]) -> list[Finding]:
    """torchrun's failure summary ('<script> FAILED', Failures, 'Root Cause (first observed failure)'): one finding
    at the root-cause rank and host, citing the title and the root cause's fields."""
    found: list[Finding] = []
    for index, entry in enumerate(entries):
        title = ELASTIC_TITLE.match(entry.message)
        if not title or index == 0 or not set(entries[index - 1].message) <= {"="}:
            continue
        finding = Finding(problem="worker_failed", lines=[], excerpt=[], detail=f"{title['script']} failed")
        finding.cite(entry)
        fields: dict[str, str] = {}
        in_root = False
        for following in entries[index + 1 :]:
            message = following.message
            if set(message) <= {"="}:
                break
            if message.startswith("Root Cause"):
                in_root = True
                finding.cite(following)
            elif message == "<NO_OTHER_FAILURES>":
                finding.cite(following)
            elif in_root and (field_match := ELASTIC_FIELD.match(message)):
                fields[field_match["key"]] = field_match["value"].strip()
                if field_match["key"] in ("host", "rank", "exitcode", "traceback"):
                    finding.cite(following)
        _apply_root_cause(finding, fields)
        finding.count = 1
        found.append(finding)
    return found


def _apply_root_cause(finding: Finding, fields: dict[str, str]) -> None:
    if not fields:
        finding.detail += "; the root cause is not in the log"
        return
    if rank := ELASTIC_RANK.match(fields.get("rank", "")):
        finding.rank = int(rank["rank"])
    finding.node = fields.get("host") or None
    parts = [finding.detail + ": root cause"]
    if finding.rank is not None:
        parts.append(f"rank {finding.rank} (local_rank {rank['local']})")
    if exit_match := ELASTIC_EXIT.match(fields.get("exitcode", "")):
        parts.append(f"{_exit_code(exit_match['exit'])}, pid {exit_match['pid']}")
    traceback = fields.get("traceback", "")
    if traceback and traceback not in ("<N/A>", "Traceback: None"):
        parts.append(traceback)
    finding.detail = ", ".join(parts)


FR_TITLE = re.compile(r"^Not all ranks joining collective")
FR_MISSING = re.compile(r"^missing ranks: \{(?P<ranks>[\d, ]+)\}")
FR_COLLECTIVE = re.compile(r"^collective: (?P<name>\S+)")


def _flight_recorder(entries: list[LogLine]) -> list[Finding]:
    """The flight-recorder analyser's 'Not all ranks joining collective' with its 'missing ranks' line."""
    found: list[Finding] = []
    for index, entry in enumerate(entries):
        if not FR_TITLE.match(entry.message):
            continue
        block = entries[index + 1 : index + 12]
        missing = next((line for line in block if FR_MISSING.match(line.message)), None)
        if missing is None:
            continue  # without the missing ranks the block does not say who hangs
        ranks = [int(rank) for rank in FR_MISSING.match(missing.message)["ranks"].replace(" ", "").split(",")]
        collective = next((line for line in block if FR_COLLECTIVE.match(line.message)), None)
        name = FR_COLLECTIVE.match(collective.message)["name"] if collective else "a collective"
        finding = Finding(
            problem="collective_not_joined",
            lines=[],
            excerpt=[],
            detail=f"{_named_ranks(ranks)} never joined {name}: {entry.message}",
            rank=ranks[0] if len(ranks) == 1 else None,
            ranks=ranks,
        )
        for line in [entry, collective, missing]:
            if line is not None:
                finding.cite(line)
        finding.count = 1
        found.append(finding)
    return found


Q_GPU = re.compile(r"^GPU (?P<gpu>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])$")
Q_FIELD = re.compile(r"^(?P<indent> *)(?P<key>\S.*?)\s+: (?P<value>.*)$")
# The clocks-event reasons that slow a GPU down whatever the load asks for (nvidia-smi -q; older drivers say
# "Clocks Throttle Reasons"). SW Power Cap is left out: a card at its default limit under full load sits at it.
Q_REASON_SECTIONS = {"Clocks Event Reasons", "Clocks Throttle Reasons"}
Q_SLOWDOWNS = {"HW Slowdown", "HW Thermal Slowdown", "SW Thermal Slowdown", "HW Power Brake Slowdown"}
Q_UNCORRECTABLE = re.compile(r"^(?:(?:DRAM|SRAM) )?Uncorrectable(?: Error)?$|^Double Bit ECC$")


def _nvidia_smi_q(entries: list[LogLine]) -> list[Finding]:
    """nvidia-smi -q: 'Remapped Rows' with 'Pending : Yes' or 'Remapping Failure Occurred : Yes' (row_remap),
    non-zero uncorrectable counts under 'ECC Errors' (ecc_uncorrectable), and a thermal / HW slowdown or power brake
    'Active' under 'Clocks Event Reasons' (gpu_clocks_throttled), per GPU, citing the section and the value."""
    found: dict[tuple, Finding] = {}
    gpu: str | None = None
    sections: list[tuple[int, LogLine]] = []  # open section headers (indent, line)
    for entry in entries:
        if match := Q_GPU.match(entry.text):
            gpu, sections = match["gpu"], []
            continue
        indent = len(entry.text) - len(entry.text.lstrip(" "))
        sections = [(level, header) for level, header in sections if level < indent]
        field_match = Q_FIELD.match(entry.text)
        if field_match is None:
            sections.append((indent, entry))
            continue
        path = [header.message for _, header in sections]
        key, value = field_match["key"], field_match["value"].strip()
        problem, detail = _q_problem(path, key, value)
        if problem is None:
            continue
        finding = found.get((problem, gpu))
        if finding is None:
            finding = found[(problem, gpu)] = Finding(problem=problem, lines=[], excerpt=[], detail=detail, gpu=gpu)
        for _, header in sections:
            finding.cite(header)
        finding.cite(entry)
    for finding in found.values():
        finding.count = len(finding.lines)
    return list(found.values())


def _q_problem(path: list[str], key: str, value: str) -> tuple[str | None, str]:
    reasons = Q_REASON_SECTIONS & set(path)
    if reasons and key in Q_SLOWDOWNS and value == "Active":
        return "gpu_clocks_throttled", f"{key} active: the GPU's clocks are held down"
    if "Remapped Rows" in path and key == "Pending" and value == "Yes":
        return "row_remap", "row remapping pending: it takes effect when the GPU is reset"
    if "Remapped Rows" in path and key == "Remapping Failure Occurred" and value == "Yes":
        return "row_remap", "row remapping failed"
    counted = "ECC Errors" in path and value.isdigit() and int(value) > 0
    if counted and (Q_UNCORRECTABLE.match(key) or ("Double Bit" in path and key == "Total")):
        return "ecc_uncorrectable", f"{' '.join(path[path.index('ECC Errors') + 1 :])} {key}: {value}".strip()
    return None, ""


# --- which interface NCCL's sockets use ------------------------------------------------------------------------

NCCL_SOCKET_USING = re.compile(r"^(?:NCCL INFO )?(?:NET/Socket|Bootstrap) ?: Using (?P<interfaces>.+)$")
SOCKET_INTERFACE_NAME = re.compile(r"(?:\[\d+\])?([^\s:\[]+):\S+?<\d+>")


def _socket_interfaces(findings: dict[tuple, Finding], entries: list[LogLine]) -> None:
    """A socket error names the peer, not the local interface; NCCL's 'NET/Socket : Using [0]ib1:…' and
    'Bootstrap : Using ib1:…' lines say which one its sockets use on that node. When they name exactly one, a socket
    finding there without a NIC gets it, citing the line that says so."""
    used: dict[str | None, dict[str, LogLine]] = {}
    for entry in entries:
        if match := NCCL_SOCKET_USING.match(entry.message):
            for name in SOCKET_INTERFACE_NAME.findall(match["interfaces"]):
                used.setdefault(entry.node, {}).setdefault(name, entry)
    for finding in findings.values():
        if finding.problem != "nccl_socket_error" or finding.nic:
            continue
        names = used.get(finding.node, {}) if finding.node or len(used) != 1 else next(iter(used.values()))
        if len(names) == 1:
            ((name, line),) = names.items()
            finding.nic = name
            finding.cite(line)
            finding.count -= 1  # the interface line is where, not another occurrence


# --- PyTorch's desync report (TORCH_NCCL_DESYNC_DEBUG=1) -------------------------------------------------------

DESYNC_TIMEOUT = re.compile(r"^- \[(?P<rank>\d+)\] Timeout at collective: (?P<op>[^,]+), #(?P<seq>\d+)")
DESYNC_NEVER_JOINED = re.compile(
    r"^- To our best knowledge, ranks \[(?P<ranks>[\d, ]+)\] are the lagging ranks that caused this timeout"
)
DESYNC_LAGGING = re.compile(r"^- \[(?P<ranks>[\d, ]+)\] joined but didn't finish collective #(?P<seq>\d+)")
DESYNC_FINISHED = re.compile(
    r"^\[(?P<ranks>[\d, ]+)\] finished collective #(?P<seq>\d+), but didn't join collective #(?P<next>\d+)"
)


def _ranks(text: str) -> list[int]:
    return [int(rank) for rank in text.replace(" ", "").split(",") if rank]


def _named_ranks(ranks: list[int], shown: str | None = None) -> str:
    """ "rank 5" or "ranks 6, 7" (`shown`: the ranks as the log wrote them). Parsers import nothing of the project,
    so this is the one count-with-noun text outside apps.core.text.counted."""
    return f"{'rank' if len(ranks) == 1 else 'ranks'} {shown if shown is not None else ', '.join(map(str, ranks))}"


def _desync_report(entries: list[LogLine]) -> list[Finding]:
    """ProcessGroupNCCL's desync report (retrieveDesyncReport in c10d's TraceUtils.h) names the lagging ranks: ranks
    that never joined any collective, or ranks that joined collective #N but did not finish it while the others
    finished it and wait in #N+1. One finding at the lagging rank (when one), citing the report's lines. A report in
    which every rank it lists joined and none finished names no lagging rank and gives no finding."""
    found: list[Finding] = []
    for index, entry in enumerate(entries):
        before = entries[max(index - 3, 0) : index]
        timeout = next((line for line in reversed(before) if DESYNC_TIMEOUT.match(line.message)), None)
        seen = f" (desync report of rank {DESYNC_TIMEOUT.match(timeout.message)['rank']})" if timeout else ""
        cited = [line for line in (timeout, entry) if line is not None]
        if match := DESYNC_NEVER_JOINED.match(entry.message):
            lagging = _ranks(match["ranks"])
            detail = f"{_named_ranks(lagging)} never joined any collective{seen}"
        elif (match := DESYNC_LAGGING.match(entry.message)) and index + 1 < len(entries):
            finished = DESYNC_FINISHED.match(entries[index + 1].message)
            if finished is None:
                continue
            lagging = _ranks(match["ranks"])
            detail = (
                f"{_named_ranks(lagging)} joined collective #{match['seq']} and did not finish it; "
                f"{_named_ranks(_ranks(finished['ranks']), finished['ranks'])} finished it, waiting in "
                f"#{finished['next']}{seen}"
            )
            cited.append(entries[index + 1])
        else:
            continue
        finding = Finding(
            problem="collective_not_joined",
            lines=[],
            excerpt=[],
            detail=detail,
            rank=lagging[0] if len(lagging) == 1 else None,
            ranks=lagging,
            node=entry.node,
        )
        for line in cited:
            finding.cite(line)
        finding.count = 1
        found.append(finding)
    return found


# --- InfiniBand port state (ibstat, ibv_devinfo, ibstatus) -----------------------------------------------------

IB_DEVICE = re.compile(r"^CA '(?P<ca>[^']+)'$|^hca_id:\s*(?P<hca>\S+)$")
IB_PORT = re.compile(r"^Port (?P<port>\d+):$|^port:\s*(?P<devinfo>\d+)$")
IBSTATUS_PORT = re.compile(r"^Infiniband device '(?P<ca>[^']+)' port (?P<port>\d+) status:$")
IB_STATE = re.compile(r"^(?P<key>State|state|Physical state|phys_state|phys state):\s*(?P<value>\S.*)$")
IB_PHYSICAL_DOWN = {
    "polling": "no link: the port sees no partner (cable, transceiver or switch port)",
    "disabled": "the port is disabled (by the subnet manager, the switch or the NIC's configuration)",
}


def _ib_ports(entries: list[LogLine]) -> list[Finding]:
    """ibstat / ibv_devinfo / ibstatus: a port whose state is Down or whose physical state is Polling or Disabled,
    one finding per device (nic), citing the device, the port and its state lines."""
    found: dict[str, Finding] = {}
    device: LogLine | None = None
    name: str | None = None
    port: tuple[str, list[LogLine], dict[str, str]] | None = None  # number, lines, state values

    def close() -> None:
        if port is not None and name is not None and device is not None:
            _ib_port_finding(found, name, device, *port)

    for entry in entries:
        message = entry.message
        if match := IBSTATUS_PORT.match(message):
            close()
            device, name, port = entry, match["ca"], (match["port"], [], {})
        elif match := IB_DEVICE.match(message):
            close()
            device, name, port = entry, match["ca"] or match["hca"], None
        elif (match := IB_PORT.match(message)) and device is not None:
            close()
            port = (match["port"] or match["devinfo"], [entry], {})
        elif (match := IB_STATE.match(message)) and port is not None:
            key = "physical" if match["key"].lower().startswith("ph") else "state"
            port[1].append(entry)
            port[2][key] = re.sub(r"\s*\(\d+\)$", "", match["value"].strip())
    close()
    return list(found.values())


def _ib_port_finding(
    found: dict[str, Finding], name: str, device: LogLine, number: str, lines: list[LogLine], values: dict[str, str]
) -> None:
    state = normalise_state(values.get("state"))
    physical = normalise_physical_state(values.get("physical"))
    meaning = IB_PHYSICAL_DOWN.get((physical or "").lower())
    if state != "DOWN" and meaning is None:
        return
    if meaning is None:
        meaning = (
            "the link is up but no subnet manager has brought the port up"
            if (physical or "").lower() == "linkup"
            else "the port is down"
        )
    said = f"state {state}" + (f", physical state {physical}" if physical else "")
    finding = found.get(name)
    if finding is None:
        finding = found[name] = Finding(problem="ib_port_down", lines=[], excerpt=[], detail="", nic=name)
        finding.cite(device)
    part = f"{name} port {number}: {said}: {meaning}"
    finding.detail = f"{finding.detail}; {part}" if finding.detail else part
    for line in lines:
        finding.cite(line)
    finding.count = 1
