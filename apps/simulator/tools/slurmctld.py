"""The Slurm controller's node states, as Slurm 22.05 prints and changes them: `sinfo -N -o FORMAT`, `scontrol show
node [-o] [NAME]`, `scontrol update NodeName=X State=DRAIN|DOWN|RESUME [Reason=…]` and `scontrol reboot [ASAP]
[nextstate=RESUME|DOWN] [reason=…] NODES`.

What a real controller answered was checked against Debian's slurmctld 22.05.8 (tests/schedulers/): a drained idle
node is `drained` in sinfo and `IDLE+DRAIN` in scontrol, a drained node still running a job `draining` and
`ALLOCATED+DRAIN`; a reboot ASAP is `DRAIN+REBOOT_REQUESTED` with `NextState=RESUME` (sinfo: `reboot`), reason
"Reboot ASAP" when none was given; the reason comes back with `[user@time]`; RESUME of a node that is not drained is
refused with "Invalid node state specified". The nodes are the cluster's compute nodes (Context.cluster), idle, or
allocated while a Slurm training run holds them. The simulated controller does not carry a requested reboot out:
the node stays `REBOOT_REQUESTED` until resumed (a reboot of the node itself is the `reboot` job's).
"""

from datetime import datetime

from apps.simulator import clock
from apps.simulator.terminal import ClusterHost, CommandOutput, Context, fail, ok
from apps.simulator.training import cluster_runs

VERSION = "22.05.8"
USER = "root"  # who runs scontrol on the controller; Slurm stamps reasons with it
INVALID_NAME = "slurm_update error: Invalid node name specified\n"
INVALID_STATE = "slurm_update error: Invalid node state specified\n"
NO_REASON = "You must specify a reason when DOWNING or DRAINING a node. Request denied\n"
# sinfo's long (%T) and short (%t) names of what the controller prints as base+flags.
LONG = {"IDLE": "idle", "ALLOCATED": "allocated", "MIXED": "mixed", "DOWN": "down", "UNKNOWN": "unknown"}
SHORT = {"IDLE": "idle", "ALLOCATED": "alloc", "MIXED": "mix", "DOWN": "down", "UNKNOWN": "unk"}


def _now() -> float:
    return clock.now()


def _stamp(at: float) -> str:
    return datetime.fromtimestamp(at).strftime("%Y-%m-%dT%H:%M:%S")  # slurmctld prints its local time


def _hosts(context: Context) -> dict[str, ClusterHost]:
    return {host.hostname: host for host in (context.cluster() if context.cluster is not None else [])}


def _known(context: Context, hosts: dict[str, ClusterHost], name: str) -> bool:
    if context.cluster is not None:
        return name in hosts
    return context.peers is None or context.peers(name) is not None


def _allocated() -> set[str]:
    return {host for run in cluster_runs() if run.launcher == "slurm" for host in run.hosts}


def _state(context: Context, name: str, busy: set[str]) -> tuple[str, list[str], dict]:
    """(base state, flags, the stored record) of one node."""
    record = context.state.slurm_nodes.get(name) or {}
    flags = []
    if record.get("drain"):
        flags.append("DRAIN")
    if record.get("reboot"):
        flags.append("REBOOT_REQUESTED")
    if record.get("down"):  # set down by an administrator: no work runs on it
        return "DOWN", flags, record
    return ("ALLOCATED" if name in busy else "IDLE"), flags, record


def _long(base: str, flags: list[str]) -> str:
    if "REBOOT_REQUESTED" in flags:
        return "reboot"
    if "DRAIN" in flags:
        return "draining" if base in {"ALLOCATED", "MIXED"} else "drained"
    return LONG[base]


def _short(base: str, flags: list[str]) -> str:
    if "REBOOT_REQUESTED" in flags:
        return "boot"
    if "DRAIN" in flags:
        return "drng" if base in {"ALLOCATED", "MIXED"} else "drain"
    return SHORT[base]


def _expand(text: str) -> list[str]:
    """A node list as scontrol and sinfo take it: names separated by commas, `gpu[001-003]` ranges."""
    names = []
    for part in text.replace("],", "]\0").split("\0"):
        stem, bracket, ranges = part.partition("[")
        if not bracket:
            names.extend(name for name in part.split(",") if name)
            continue
        for piece in ranges.rstrip("]").split(","):
            low, _, high = piece.partition("-")
            if not low.isdigit() or (high and not high.isdigit()):
                return []
            names.extend(f"{stem}{number:0{len(low)}d}" for number in range(int(low), int(high or low) + 1))
    return names


# --- sinfo -N -h -o FORMAT [-n NODES] -----------------------------------------------------------------------------

FIELDS = {
    "N": lambda name, base, flags, record: name,
    "n": lambda name, base, flags, record: name,
    "T": lambda name, base, flags, record: _long(base, flags),
    "t": lambda name, base, flags, record: _short(base, flags),
    "E": lambda name, base, flags, record: record.get("reason") or "none",
    "H": lambda name, base, flags, record: record.get("at") or "Unknown",
    "u": lambda name, base, flags, record: record.get("user") or USER,
    "P": lambda name, base, flags, record: "gpu*",
}


def _format(spec: str, row: tuple) -> str | None:
    out, i = [], 0
    while i < len(spec):
        if spec[i] != "%":
            out.append(spec[i])
            i += 1
            continue
        j = i + 1
        while j < len(spec) and (spec[j].isdigit() or spec[j] in ".-"):
            j += 1  # a width (%20N): the value is what counts here
        if j >= len(spec) or spec[j] not in FIELDS:
            return None
        out.append(FIELDS[spec[j]](*row))
        i = j + 1
    return "".join(out)


def sinfo(context: Context, argv: list[str]) -> CommandOutput:
    args, fmt, nodes, header = argv[1:], "%N %T", None, True
    while args:
        option = args.pop(0)
        if option in ("-N", "--Node"):
            continue
        if option in ("-h", "--noheader"):
            header = False
        elif option in ("-o", "--format") and args:
            fmt = args.pop(0)
        elif option.startswith("--format="):
            fmt = option.partition("=")[2]
        elif option in ("-n", "--nodes") and args:
            nodes = _expand(args.pop(0))
        else:
            return fail(1, f"sinfo: unrecognized option '{option}'\nTry \"sinfo --help\" for more information\n")
    hosts, busy = _hosts(context), _allocated()
    names = [name for name in hosts if nodes is None or name in nodes]
    lines = []
    for name in names:
        line = _format(fmt, (name, *_state(context, name, busy)))
        if line is None:
            return fail(1, f"sinfo: error: Invalid node format specification: {fmt}\n")
        lines.append(line)
    if header:
        lines.insert(0, "NODELIST STATE")  # the simulated controller titles only its default format
    return ok("".join(f"{line}\n" for line in lines))


# --- scontrol show node [-o] [NAME] ---------------------------------------------------------------------------------


def _record(host: ClusterHost, base: str, flags: list[str], record: dict) -> list[str]:
    """One node as `scontrol show node` prints it (22.05), one line per group of fields."""
    gres = f"gpu:{host.gpus}" if host.gpus else "(null)"
    tres = f"cpu={host.cpus},mem={host.memory_mib}M,billing={host.cpus}" + (
        f",gres/gpu={host.gpus}" if host.gpus else ""
    )
    allocated = base in {"ALLOCATED", "MIXED"}
    state = "+".join([base, *flags])
    lines = [
        f"NodeName={host.hostname} Arch=x86_64 CoresPerSocket={max(host.cpus // 2, 1)} ",
        f"CPUAlloc={host.cpus if allocated else 0} CPUEfctv={host.cpus} CPUTot={host.cpus} CPULoad=0.50",
        "AvailableFeatures=(null)",
        "ActiveFeatures=(null)",
        f"Gres={gres}",
        f"NodeAddr={host.hostname} NodeHostName={host.hostname} Version={VERSION}",
        "OS=Linux 6.1.0-28-amd64 #1 SMP PREEMPT_DYNAMIC Debian 6.1.119-1 (2024-11-22) ",
        f"RealMemory={host.memory_mib} AllocMem=0 FreeMem={host.memory_mib // 2} Sockets=2 Boards=1",
        f"State={state} ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A"
        + (f" NextState={record['next_state']}" if record.get("next_state") else ""),
        "Partitions=gpu ",
        "BootTime=None SlurmdStartTime=None",
        "LastBusyTime=Unknown",
        f"CfgTRES={tres}",
        f"AllocTRES={tres if allocated else ''}",
        "CapWatts=n/a",
        "CurrentWatts=0 AveWatts=0",
        "ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s",
    ]
    if record.get("reason"):
        lines.append(f"Reason={record['reason']} [{record.get('user') or USER}@{record.get('at')}]")
    return lines


def show_node(context: Context, args: list[str]) -> CommandOutput:
    oneliner = "-o" in args or "--oneliner" in args
    names = [arg for arg in args if not arg.startswith("-")]
    hosts, busy = _hosts(context), _allocated()
    if names:
        wanted = _expand(names[0])
        missing = [name for name in wanted if name not in hosts]
        if missing:
            return fail(1, f"Node {missing[0]} not found\n")
    else:
        wanted = list(hosts)
    records = []
    for name in wanted:
        lines = _record(hosts[name], *_state(context, name, busy))
        records.append(" ".join(line.strip() for line in lines) if oneliner else "\n   ".join(lines) + "\n")
    return ok("".join(f"{record}\n" for record in records))


# --- scontrol update / reboot ----------------------------------------------------------------------------------------


def update_node(context: Context, fields: dict[str, str]) -> CommandOutput:
    hosts = _hosts(context)
    names = _expand(fields["NodeName"])
    if not names or not all(_known(context, hosts, name) for name in names):
        return fail(1, INVALID_NAME)
    state = fields.get("State", "").upper()
    if state in ("DRAIN", "DOWN"):
        if not fields.get("Reason"):
            return fail(1, NO_REASON)
        at = _stamp(_now())
        for name in names:
            record = dict(context.state.slurm_nodes.get(name) or {})
            record.update(reason=fields["Reason"], user=USER, at=at, **{state.lower(): True})
            context.change(f"slurm:{name}", record)
        return ok("")
    # RESUME: clears the drain, the down state and a pending reboot; a node that was none of them is Slurm's
    # "invalid state".
    refused = False
    for name in names:
        record = context.state.slurm_nodes.get(name) or {}
        if not record.get("drain") and not record.get("reboot") and not record.get("down"):
            refused = True
            continue
        context.change(f"slurm:{name}", {})
    return fail(1, INVALID_STATE) if refused else ok("")


def reboot(context: Context, args: list[str]) -> CommandOutput:
    """`scontrol reboot [ASAP] [nextstate=RESUME|DOWN] [reason=…] NODES`: ASAP drains the nodes so no new work
    lands while the running jobs finish; the reboot then waits for them."""
    asap, next_state, reason, nodes = False, "", "", ""
    for arg in args:
        key, eq, value = arg.partition("=")
        if arg.upper() == "ASAP":
            asap = True
        elif eq and key.lower() == "nextstate" and value.upper() in {"RESUME", "DOWN"}:
            next_state = value.upper()
        elif eq and key.lower() == "reason":
            reason = value
        elif not eq and not nodes:
            nodes = arg
        else:
            return fail(1, f"scontrol: error: Invalid input: {arg}\n")
    hosts = _hosts(context)
    names = _expand(nodes) if nodes else list(hosts)
    if not names or not all(_known(context, hosts, name) for name in names):
        return fail(1, "scontrol_reboot_nodes error: Invalid node name specified\n")
    at = _stamp(_now())
    for name in names:
        record = dict(context.state.slurm_nodes.get(name) or {})
        record.update(reboot=True, next_state=next_state)
        if asap:
            record.update(drain=True, reason=reason or "Reboot ASAP", user=USER, at=at)
        elif reason:
            record.update(reason=reason, user=USER, at=at)
        context.change(f"slurm:{name}", record)
    return ok("")
