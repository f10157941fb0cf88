"""The files on a node's hot and warm volumes, and the tools storage tiering reads and moves them with: find (-atime,
-size, -name, -maxdepth, -printf), lsof -F +D, mkdir -p and mv -n -T.

The files come from the workloads, deterministic per seed and per day:
- each hot and warm volume keeps the checkpoints of three earlier experiments (`ckpt/<run>/step_N.pt`, saved six hours
  apart, never read again) that ended about 3, 12 and 40 days ago, with the run's evaluation notes (a name with
  spaces, quotes and shell metacharacters, as people name files);
- a tokenized data set (`datasets/tokenized/part-N.bin`) that training reads every epoch: read within the last day;
- a running training job whose checkpoint directory is on the volume: a checkpoint every `checkpoint_interval` steps
  since it started (the newest eight kept), this host's ranks' shards. Its newest checkpoint is the one a restart
  would load, and its ranks hold it open (lsof shows them), so tiering must leave it.
A file `mv` moved is recorded (SimChange `tiered:…`) and is found at its new path, with its access time kept (mv
across file systems copies the times, as `cp -a` does).
"""

import fnmatch
import hashlib
from dataclasses import dataclass, replace

from apps.simulator import clock
from apps.simulator.model import noise
from apps.simulator.terminal import CommandOutput, Context, fail, ok
from apps.simulator.training import SHARD_BYTES, STARTUP_SECONDS, TrainingRun, checkpoint_path, runs_on, shard_name

DAY = 86400.0
TIERED = "tiered:"
EARLIER_RUNS = (3, 12, 40)  # days since each earlier experiment ended
CHECKPOINTS_PER_RUN = 4
KEPT_CHECKPOINTS = 8
DATASET_PARTS = 6
# Short experiments keep their checkpoints on the hot tier, long ones on the warm tier (no name on both).
EXPERIMENTS = {"hot": ("sft", "dpo", "ablation", "eval"), "warm": ("pretrain", "long-ctx", "distill", "rlhf")}
RANK_PID_BASE = 41000  # the ranks' python processes, as lsof shows them


@dataclass(frozen=True)
class SimFile:
    path: str
    size: int
    atime: float
    open_by: tuple[int, ...] = ()  # pids of the processes holding it open


def _volumes(context: Context):
    return [volume for volume in context.state.volumes if volume.kind in ("hot", "warm")]


def _earlier_runs(context: Context, mount: str, kind: str, today: float, hour: float) -> list[SimFile]:
    rng = noise(context.seed, context.hostname, "tier-files", mount)
    files = []
    for number, ended_days in enumerate(EARLIER_RUNS):
        run = f"exp-{rng.choice(EXPERIMENTS[kind])}-{number + 1:02d}"
        ended = today - ended_days * DAY - rng.uniform(0, 0.5) * DAY
        for index in range(CHECKPOINTS_PER_RUN):
            saved = ended - (CHECKPOINTS_PER_RUN - 1 - index) * 6 * 3600
            size = int(rng.uniform(1.6, 2.4) * 2**30)
            files.append(SimFile(f"{mount}/ckpt/{run}/step_{(index + 1) * 1000:07d}.pt", size, saved))
        notes = f'{mount}/ckpt/{run}/eval "v{number + 1}" & $HOME; notes (copy).txt'
        files.append(SimFile(notes, int(rng.uniform(20, 80) * 1024), ended + 600))
    # Read by every epoch: within the last 0.9 day before the hour now is in (an hour keeps listings stable).
    for part in range(DATASET_PARTS):
        read = hour - rng.uniform(0.0, 0.9) * DAY
        files.append(SimFile(f"{mount}/datasets/tokenized/part-{part:05d}.bin", int(rng.uniform(3, 5) * 2**30), read))
    return files


def _under(path: str, directory: str) -> bool:
    directory = directory.rstrip("/") or "/"
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def run_checkpoints(run: TrainingRun, host: str, now: float) -> list[SimFile]:
    """This host's shards of the run's newest checkpoints by now (the newest open by its ranks)."""
    every = run.checkpoint_interval * run.step_seconds
    if every <= 0 or host not in run.hosts:
        return []
    saves = int((now - run.started - STARTUP_SECONDS) // every)
    node_rank = run.hosts.index(host)
    ranks = range(node_rank * run.ranks_per_node, (node_rank + 1) * run.ranks_per_node)
    pids = tuple(RANK_PID_BASE + local for local in range(run.ranks_per_node))
    files = []
    for save in range(max(1, saves - KEPT_CHECKPOINTS + 1), saves + 1):
        step = save * run.checkpoint_interval
        saved = run.started + STARTUP_SECONDS + save * every
        holders = pids if save == saves else ()
        directory = checkpoint_path(run, step)
        files += [SimFile(f"{directory}/{shard_name(rank)}", SHARD_BYTES, saved, holders) for rank in ranks]
    return files


def node_files(context: Context, now: float | None = None) -> dict[str, SimFile]:
    """Every modelled file on the node's hot and warm volumes, by the path it has now."""
    key = ("tier-files", now)
    if key in context.memo:
        return context.memo[key]
    now = clock.now() if now is None else now
    today, hour = (now // DAY) * DAY, (now // 3600) * 3600
    files: list[SimFile] = []
    for volume in _volumes(context):
        files += _earlier_runs(context, volume.mount_point, volume.kind, today, hour)
        for run in runs_on(context.hostname):
            if _under(run.checkpoint_dir, volume.mount_point):
                files += run_checkpoints(run, context.hostname, now)
    moved = context.state.relocated
    found = {}
    for file in files:
        file = replace(file, path=moved.get(file.path, file.path))
        found[file.path] = file
    context.memo[key] = found
    return found


def _is_directory(files: dict[str, SimFile], context: Context, path: str) -> bool:
    path = path.rstrip("/") or "/"
    if any(_under(volume.mount_point, path) for volume in context.state.volumes):
        return True
    return any(name.startswith(path + "/") for name in files)


# --- find -----------------------------------------------------------------------------------------------------


def _printf(template: str, file: SimFile) -> str:
    out, index = [], 0
    while index < len(template):
        char = template[index]
        if char == "\\" and template[index + 1 : index + 2] == "n":
            out.append("\n")
            index += 2
        elif char == "%" and template[index + 1 : index + 3] == "A@":
            out.append(f"{file.atime:.10f}")
            index += 3
        elif char == "%" and template[index + 1 : index + 2] in ("s", "p"):
            out.append(str(file.size) if template[index + 1] == "s" else file.path)
            index += 2
        else:
            out.append(char)
            index += 1
    return "".join(out)


def _sized(test: str, size: int) -> bool:
    """find -size +Nc / -Nc / Nc (bytes)."""
    sign, number = (test[0], test[1:-1]) if test[0] in "+-" else ("", test[:-1])
    limit = int(number)
    return size > limit if sign == "+" else size < limit if sign == "-" else size == limit


def _aged(test: str, atime: float, now: float) -> bool:
    """find -atime +N / -N / N: whole days since the last read, the fraction dropped."""
    days = int((now - atime) // DAY)
    sign, number = (test[0], test[1:]) if test[0] in "+-" else ("", test)
    limit = int(number)
    return days > limit if sign == "+" else days < limit if sign == "-" else days == limit


def find(context: Context, argv: list[str]) -> CommandOutput:
    """find PATH [-xdev] [-maxdepth 0] [-type f] [-atime N] [-size Nc] [! -name GLOB] [-printf FORMAT] (GNU find)."""
    if len(argv) < 2 or argv[1].startswith("-"):
        return fail(1, "find: the simulator reads find PATH EXPRESSION\n")
    start, args, now = argv[1], argv[2:], clock.now()
    files = node_files(context, now)
    tests, template, depth_zero, index = [], "%p\n", False, 0
    while index < len(args):
        word = args[index]
        value = args[index + 1] if index + 1 < len(args) else None
        if word == "-xdev":
            index += 1
            continue
        if word in ("!", "-not") and args[index + 1 : index + 2] == ["-name"] and index + 2 < len(args):
            pattern = args[index + 2]
            tests.append(lambda file, p=pattern: not fnmatch.fnmatchcase(file.path.rsplit("/", 1)[1], p))
            index += 3
            continue
        if value is None:
            return fail(1, f"find: missing argument to `{word}'\n")
        if word == "-type" and value == "f":
            pass
        elif word == "-maxdepth" and value == "0":
            depth_zero = True
        elif word == "-atime" and value.lstrip("+-").isdigit():
            tests.append(lambda file, v=value: _aged(v, file.atime, now))
        elif word == "-size" and value.endswith("c") and value[:-1].lstrip("+-").isdigit():
            tests.append(lambda file, v=value: _sized(v, file.size))
        elif word == "-name":
            tests.append(lambda file, p=value: fnmatch.fnmatchcase(file.path.rsplit("/", 1)[1], p))
        elif word == "-printf":
            template = value
        else:
            return fail(1, f"find: the simulator does not read `{word} {value}'\n")
        index += 2
    if start in files:
        chosen = [files[start]]
    elif _is_directory(files, context, start) and not depth_zero:
        chosen = [file for path, file in sorted(files.items()) if _under(path, start)]
    elif _is_directory(files, context, start):
        chosen = []
    else:
        return fail(1, f"find: ‘{start}’: No such file or directory\n")
    return ok("".join(_printf(template, file) for file in chosen if all(test(file) for test in tests)))


# --- lsof ------------------------------------------------------------------------------------------------------


def lsof(context: Context, argv: list[str]) -> CommandOutput:
    """lsof -w -F pcfn +D DIR: the open files under DIR, grouped by process; exit 1 when there are none (lsof's)."""
    if "+D" not in argv or argv.index("+D") + 1 >= len(argv):
        return fail(1, "lsof: the simulator answers lsof -w -F pcfn +D DIRECTORY\n")
    directory = argv[argv.index("+D") + 1]
    files = node_files(context)
    if not _is_directory(files, context, directory):
        return fail(1, f"lsof: WARNING: can't stat() directory: {directory}\n")
    by_pid: dict[int, list[str]] = {}
    for path, file in sorted(files.items()):
        if _under(path, directory):
            for pid in file.open_by:
                by_pid.setdefault(pid, []).append(path)
    if not by_pid:
        return CommandOutput(1, "", "")
    lines = []
    for pid, paths in sorted(by_pid.items()):
        lines += [f"p{pid}", "cpython3"]
        for descriptor, path in enumerate(paths, start=40):
            lines += [f"f{descriptor}r", f"n{path}"]
    return ok("\n".join(lines) + "\n")


# --- mkdir and mv ----------------------------------------------------------------------------------------------


def mkdir(context: Context, argv: list[str]) -> CommandOutput:
    """mkdir -p [--] DIR...: directories exist as soon as a file is in them, so this only checks the paths."""
    paths = [arg for arg in argv[1:] if arg not in ("-p", "--")]
    if not paths:
        return fail(1, "mkdir: missing operand\n")
    bad = [path for path in paths if not path.startswith("/")]
    if bad:
        return fail(1, f"mkdir: cannot create directory ‘{bad[0]}’: No such file or directory\n")
    return ok("")


def _volume_of(context: Context, path: str):
    return max(
        (volume for volume in context.state.volumes if _under(path, volume.mount_point)),
        key=lambda volume: len(volume.mount_point),
        default=None,
    )


def mv(context: Context, argv: list[str]) -> CommandOutput:
    """mv -n -T -- SOURCE DEST: one modelled file to a path on a mounted volume (GNU mv's messages)."""
    args = argv[1:]
    options = []
    while args and args[0].startswith("-"):
        head, args = args[0], args[1:]
        if head == "--":
            break
        options.append(head)
    if len(args) != 2 or not {"-n", "-T"} <= set(options):
        return fail(1, "mv: the simulator moves one file: mv -n -T -- SOURCE DEST\n")
    source, destination = args
    files = node_files(context)
    if source not in files:
        return fail(1, f"mv: cannot stat '{source}': No such file or directory\n")
    if destination in files:
        return fail(1, f"mv: not replacing '{destination}'\n")
    if _volume_of(context, destination) is None or destination.endswith("/"):
        return fail(1, f"mv: cannot move '{source}' to '{destination}': No such file or directory\n")
    first = next((old for old, now in context.state.relocated.items() if now == source), source)
    digest = hashlib.blake2b(first.encode(), digest_size=16).hexdigest()
    context.change(f"{TIERED}{digest}", {"from": first, "to": destination})
    context.memo.clear()
    size = files[source].size
    # Copying between tiers at ~2 GB/s takes the model's time in real time only, as long benchmarks do (terminal.py):
    # otherwise only `sleep` waits, and a move of tens of GB costs no test seconds of wall clock.
    seconds = size / (2.0 * 10**9) if context.real_time else 0.0
    return CommandOutput(0, "", "", seconds)


COMMANDS = {"find": find, "lsof": lsof, "mkdir": mkdir, "mv": mv}
