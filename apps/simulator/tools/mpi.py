"""mpirun (Open MPI 4.1): nccl-tests launched across simulated nodes, as `mpirun -np 16 -H a:8,b:8 -x NCCL_... \
all_reduce_perf -b 8 -e 16G -f 2 -g 1` prints it on the launcher.

Open MPI starts one process per slot on each host (over ssh, which the simulator answers from the inventory) and
passes the variables named with -x. nccl-tests' rank 0 prints the whole report: every rank's device line, the table
and the average; with --tag-output every line carries Open MPI's `[jobid,rank]<stdout>:` prefix. What the report
says comes from tools/nccl.py and the ring model over every node's state (the slowest link on the ring sets it).
"""

from dataclasses import replace

from apps.simulator.digits import is_whole_number
from apps.simulator.state import SimulatedNode
from apps.simulator.terminal import CommandOutput, Context, fail, ok
from apps.simulator.tools import hpl, nccl, xhpl

# Options that take a value and change nothing the simulator models (process placement, MCA tuning).
VALUE_OPTIONS = {
    "--bind-to",
    "--map-by",
    "--rank-by",
    "-mca",
    "--mca",
    "--prefix",
    "--wdir",
    "-wdir",
    "--report-bindings",
}
VALUE_OPTIONS_TWO = {"-mca", "--mca"}  # --mca NAME VALUE
FLAG_OPTIONS = {"--allow-run-as-root", "--oversubscribe", "--noprefix", "-q", "--quiet", "--display-map"}

ORTE_DAEMON_FAILURE = """\
--------------------------------------------------------------------------
ORTE was unable to reliably start one or more daemons.
This usually is caused by:

* not finding the required libraries and/or binaries on
  one or more nodes. Please check your PATH and LD_LIBRARY_PATH
  settings, or configure OMPI with --enable-orterun-prefix-by-default

* lack of authority to execute on one or more specified nodes.
  Please verify your allocation and authorities.

* the inability to write startup files into /tmp (--tmpdir/orte_tmpdir_base).
  Please check with your sys admin to determine the correct location to use.

*  compilation of the orted with dynamic libraries when static are required
  (e.g., on Cray). Please check your configure cmd line and consider using
  one of the contrib/platform definitions for your system type.

* an inability to create a connection back to mpirun due to a
  lack of common network interfaces and/or no route found between
  them. Please check network connectivity (including firewalls
  and network routing requirements).
--------------------------------------------------------------------------
"""


class MpiUsage(ValueError):
    pass


def _hosts(value: str) -> list[tuple[str, int | None]]:
    """-H a:8,b:8 -> [(a, 8), (b, 8)]; a host without ':N' has one slot, as Open MPI counts it."""
    hosts = []
    for entry in value.split(","):
        name, _, slots = entry.partition(":")
        if not name or (slots and not is_whole_number(slots)):
            raise MpiUsage(f"mpirun: invalid host entry '{entry}'")
        hosts.append((name, int(slots) if slots else None))
    return hosts


def _hostfile(context: Context, path: str) -> list[tuple[str, int | None]]:
    """A hostfile on the launcher: 'host slots=N' lines (# comments)."""
    text = context.state.files.get(path)
    if text is None:
        raise MpiUsage(f"mpirun: hostfile {path} not found")
    hosts = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, *rest = line.split()
        slots = next((item.split("=", 1)[1] for item in rest if item.startswith("slots=")), None)
        hosts.append((name, int(slots) if slots and is_whole_number(slots) else None))
    return hosts


def parse_mpirun(context: Context, args: list[str]) -> tuple[dict, list[str]]:
    """Open MPI's options up to the program, and the program's argv."""
    options: dict = {"hosts": [], "np": None, "npernode": None, "env": {}, "tag_output": False}
    position = 0
    while position < len(args):
        word = args[position]
        value = args[position + 1] if position + 1 < len(args) else None
        if not word.startswith("-"):
            return options, args[position:]
        if word in ("-np", "-n", "-c", "--np"):
            if value is None or not is_whole_number(value):
                raise MpiUsage(f"mpirun: {word} needs a number of processes")
            options["np"] = int(value)
        elif word in ("-N", "--npernode", "-npernode"):
            if value is None or not is_whole_number(value):
                raise MpiUsage(f"mpirun: {word} needs a number of processes per node")
            options["npernode"] = int(value)
        elif word in ("-H", "--host", "-host"):
            options["hosts"] += _hosts(value or "")
        elif word in ("--hostfile", "-hostfile", "--machinefile", "-machinefile"):
            options["hosts"] += _hostfile(context, value or "")
        elif word == "-x":
            if not value:
                raise MpiUsage("mpirun: -x needs a variable name")
            name, equals, assigned = value.partition("=")
            if equals:
                options["env"][name] = assigned
            elif name in context.env:
                options["env"][name] = context.env[name]
        elif word in ("--tag-output", "-tag-output"):
            options["tag_output"] = True
            position += 1
            continue
        elif word in FLAG_OPTIONS:
            position += 1
            continue
        elif word in VALUE_OPTIONS_TWO:
            position += 3
            continue
        elif word in VALUE_OPTIONS:
            pass
        else:
            raise MpiUsage(f'mpirun: Error: unknown option "{word}"')
        position += 2
    return options, []


def _unreachable(hostname: str) -> CommandOutput:
    return CommandOutput(
        1, "", f"ssh: Could not resolve hostname {hostname}: Name or service not known\n" + ORTE_DAEMON_FAILURE
    )


def mpirun(context: Context, argv: list[str]) -> CommandOutput:
    args = argv[1:]
    if args in (["--version"], ["-V"]):
        return ok(
            f"mpirun (Open MPI) {context.state.openmpi_version}\n\n"
            "Report bugs to https://www.open-mpi.org/community/help/\n"
        )
    try:
        options, program = parse_mpirun(context, args)
    except MpiUsage as error:
        return fail(1, f"{error}\n")
    if not program:
        return fail(1, "mpirun: no executable was specified on the command line\n")
    binary = program[0].rsplit("/", 1)[-1]
    if binary not in nccl.BINARIES and binary not in hpl.BINARIES and binary not in xhpl.BINARIES:
        return fail(
            1,
            "--------------------------------------------------------------------------\n"
            f"mpirun was unable to find the specified executable file, and therefore\ndid not launch the job. "
            "(the simulator launches nccl-tests, HPL and HPL-MxP only)\n\n"
            f"Executable: {program[0]}\nNode: {context.hostname}\n"
            "--------------------------------------------------------------------------\n",
        )
    hosts = options["hosts"] or [(context.hostname, None)]
    context.read_peers([hostname for hostname, _slots in hosts])
    states: list[SimulatedNode] = []
    for hostname, _slots in hosts:
        state = context.peers(hostname) if context.peers is not None else None
        if state is None and hostname == context.hostname:
            state = context.state
        if state is None:
            return _unreachable(hostname)
        states.append(state)
    per_node = _processes_per_node(options, hosts, binary)
    if isinstance(per_node, CommandOutput):
        return per_node
    if binary in xhpl.BINARIES:
        try:
            path = xhpl.dat_path(program)
            if path not in context.state.files:
                raise xhpl.HplUsage(f"HPL.dat not found: {path}")
            dat = xhpl.read_dat(context.state.files[path])
        except xhpl.HplUsage as error:
            return fail(1, f"HPL ERROR: {error}\n")
        report = xhpl.run_hpl(states, per_node, dat, seed=context.seed, launcher=context.hostname)
        return _tagged(report, options["tag_output"])
    if binary in hpl.BINARIES:
        report = hpl.run_hpl_mxp(states, per_node, program, seed=context.seed, launcher=context.hostname)
        return _tagged(report, options["tag_output"])
    try:
        args_parsed = nccl.parse_args(program[1:])
    except nccl.UsageError as error:
        return fail(1, f"{binary}: {error}\n")
    # One process per slot; each drives args.gpus GPUs of its node.
    node_args = replace(args_parsed, gpus=args_parsed.gpus * per_node)
    env = {**context.env, **options["env"]}
    report = nccl.run_nccl_tests(
        states, binary, node_args, seed=context.seed, per_process_gpus=args_parsed.gpus, env=env
    )
    if report.exit_code == 0:
        _count_traffic(context, nccl.rail_traffic(states, binary, node_args, env))
    return nccl.paced(context, _tagged(report, options["tag_output"]))


def _count_traffic(context: Context, traffic: dict[str, dict[str, int]]) -> None:
    """The bytes the run moved through each node's NICs, added to what they carried before (their counters)."""
    for hostname, rails in traffic.items():
        state = context.state if hostname == context.hostname else context.peers(hostname)
        for name, received in rails.items():
            nic = state.nic(name)
            context.change_on(hostname, f"nic:{name}:traffic", nic.traffic_bytes + received)


def _tagged(report: CommandOutput, tag_output: bool) -> CommandOutput:
    """Rank 0's report with --tag-output's prefixes, and Open MPI's abort notice when a rank failed."""
    stdout = report.stdout
    if tag_output:
        stdout = "".join(f"[1,0]<stdout>:{line}\n" for line in stdout.splitlines())
    if report.exit_code:
        stdout += (
            "--------------------------------------------------------------------------\n"
            "Primary job  terminated normally, but 1 process returned\n"
            "a non-zero exit code. Per user-direction, the job has been aborted.\n"
            "--------------------------------------------------------------------------\n"
        )
    return CommandOutput(report.exit_code, stdout, report.stderr, report.seconds)


def _processes_per_node(options: dict, hosts: list[tuple[str, int | None]], binary: str) -> int | CommandOutput:
    """Processes each host runs: --npernode, else -np spread over the slots (every host the same here)."""
    slots = [slot or 1 for _, slot in hosts]
    if options["npernode"]:
        return options["npernode"]
    total = options["np"] or sum(slots)
    if total > sum(slots):
        return fail(
            1,
            "--------------------------------------------------------------------------\n"
            f"There are not enough slots available in the system to satisfy the {total}\nslots that were "
            f"requested by the application:\n\n  {binary}\n\n"
            "Either request fewer slots for your application, or make more slots\navailable for use.\n"
            "--------------------------------------------------------------------------\n",
        )
    if total % len(hosts):
        return fail(1, f"mpirun: {total} processes do not spread evenly over {len(hosts)} hosts\n")
    return total // len(hosts)


COMMANDS = {"mpirun": mpirun}
