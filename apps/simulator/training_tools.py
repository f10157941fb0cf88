"""`tail` on a simulated node: the end of a file the node has (a training run's log, a config, sysfs); and
`systemd-run … torchrun …`, the relaunch of a training run from a chosen checkpoint."""

import hashlib

from apps.simulator.terminal import CommandOutput, Context, fail, ok
from apps.simulator.tools.system import read_file
from apps.simulator.training_faults import RESUME

DEFAULT_LINES = 10


def tail(context: Context, argv: list[str]) -> CommandOutput:
    """tail [-n N] FILE (GNU coreutils' messages)."""
    args, count = argv[1:], DEFAULT_LINES
    if len(args) >= 2 and args[0] == "-n":
        if not args[1].isdigit():
            return fail(1, f"tail: invalid number of lines: ‘{args[1]}’\n")
        count, args = int(args[1]), args[2:]
    if len(args) != 1:
        return fail(1, "tail: the simulator reads one file: tail [-n N] FILE\n")
    content = read_file(context, args[0], last_lines=count)
    if content is None:
        return fail(1, f"tail: cannot open '{args[0]}' for reading: No such file or directory\n")
    lines = content.splitlines(keepends=True)
    return ok("".join(lines[-count:]) if count else "")


TORCHRUN_OPTIONS = ("--nnodes", "--nproc-per-node", "--node-rank", "--rdzv-id", "--rdzv-backend", "--rdzv-endpoint")


def _options(args: list[str], names: tuple[str, ...]) -> tuple[dict[str, str], list[str]] | None:
    """`--name value` / `--name=value` pairs at the front of args, and the rest (None: an option lacks its value)."""
    found: dict[str, str] = {}
    while args and args[0].startswith("--"):
        name, equals, value = args[0].partition("=")
        if name not in names:
            break
        if equals:
            found[name], args = value, args[1:]
        elif len(args) >= 2:
            found[name], args = args[1], args[2:]
        else:
            return None
    return found, args


def systemd_run(context: Context, argv: list[str]) -> CommandOutput:
    """systemd-run --unit U [--collect] torchrun …: the node's share of a training run's relaunch. The simulated run
    starts again once every node rank of the rendezvous has been launched (apps/simulator/training_faults)."""
    args, unit = argv[1:], ""
    while args and args[0].startswith("--"):
        if args[0] == "--unit" and len(args) >= 2:
            unit, args = args[1], args[2:]
        elif args[0].startswith("--unit="):
            unit, args = args[0].partition("=")[2], args[1:]
        elif args[0] == "--collect":
            args = args[1:]
        else:
            return fail(1, f"systemd-run: unrecognized option '{args[0]}'\n")
    if not args:
        return fail(1, "systemd-run: Command line to execute required.\n")
    if args[0].rsplit("/", 1)[-1] != "torchrun":
        return fail(1, f"Failed to start transient service unit: the simulator runs only torchrun, not {args[0]}\n")
    parsed = _options(args[1:], TORCHRUN_OPTIONS)
    if parsed is None:
        return fail(1, "torchrun: error: an option needs a value\n")
    options, rest = parsed
    script_args = rest[1:] if rest else []
    program = dict(zip(script_args[::2], script_args[1::2], strict=False))
    try:
        nnodes, node_rank, step = int(options["--nnodes"]), int(options["--node-rank"]), int(program["--ckpt-step"])
        rendezvous, load = options["--rdzv-id"], program["--load"]
    except (KeyError, ValueError):
        return fail(
            2,
            "torchrun: error: the simulator relaunches with --nnodes, --node-rank, --rdzv-id, --load and --ckpt-step\n",
        )
    if not 0 <= node_rank < nnodes:
        return fail(2, f"torchrun: error: --node-rank {node_rank} is not below --nnodes {nnodes}\n")
    context.change(f"{RESUME}{rendezvous}:{node_rank}", {"nnodes": nnodes, "load": load, "step": step})
    unit = unit or f"run-r{hashlib.blake2b(rendezvous.encode(), digest_size=8).hexdigest()}"
    invocation = hashlib.blake2b(f"{unit}:{context.hostname}".encode(), digest_size=16).hexdigest()
    return CommandOutput(0, "", f"Running as unit: {unit}.service; invocation ID: {invocation}\n")


LAST_JOB_ID = "/var/spool/slurmctld/last_job_id"
FIRST_JOB_ID = 4211
SBATCH_OPTIONS = ("--job-name", "--nodes", "--nodelist", "--exclude", "--ntasks-per-node", "--gpus-per-node")


def sbatch(context: Context, argv: list[str]) -> CommandOutput:
    """sbatch --job-name N --nodes K --nodelist H,... [--exclude H,...] SCRIPT --load DIR --ckpt-step S, on the
    controller: Slurm places the job on the listed nodes (node rank = list order) and the batch script resumes
    the training run from the step. A node the cluster does not know, or one both listed and excluded, is Slurm's
    own refusal."""
    parsed = _options(argv[1:], SBATCH_OPTIONS)
    if parsed is None:
        return fail(1, "sbatch: error: an option needs a value\n")
    options, rest = parsed
    if not rest:
        return fail(1, "sbatch: error: Batch job submission failed: no batch script given\n")
    program = dict(zip(rest[1::2], rest[2::2], strict=False))
    hosts = [host for host in options.get("--nodelist", "").split(",") if host]
    excluded = {host for host in options.get("--exclude", "").split(",") if host}
    try:
        step, load = int(program["--ckpt-step"]), program["--load"]
        nodes = int(options.get("--nodes", len(hosts)))
    except (KeyError, ValueError):
        return fail(1, "sbatch: error: the simulator resumes batch scripts given --load DIR --ckpt-step N\n")
    unknown = [
        host for host in hosts if context.peers is not None and host != context.hostname and not context.peers(host)
    ]
    if not hosts or nodes != len(hosts) or unknown or excluded & set(hosts):
        return fail(1, "sbatch: error: Batch job submission failed: Requested node configuration is not available\n")
    last = (read_file(context, LAST_JOB_ID) or "").strip()
    number = int(last) + 1 if last.isdigit() else FIRST_JOB_ID
    context.change(f"file:{LAST_JOB_ID}", f"{number}\n")  # slurmctld numbers every submission anew
    for rank, host in enumerate(hosts):
        context.change(
            f"{RESUME}slurm-{number}:{rank}", {"nnodes": len(hosts), "load": load, "step": step, "host": host}
        )
    return ok(f"Submitted batch job {number}\n")


COMMANDS = {"tail": tail, "systemd-run": systemd_run, "sbatch": sbatch}
