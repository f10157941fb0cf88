"""Disks and files: lsblk -J, df (-P, -h, -B1), ls and sha256sum over the training job's checkpoints."""

import hashlib

from apps.simulator.model import noise
from apps.simulator.state import CHECKPOINT_DIR, SimCheckpoint, SimulatedNode, SimVolume
from apps.simulator.terminal import CommandOutput, Context, fail, ok
from apps.simulator.tools.common import util_linux_json
from apps.simulator.training import MANIFEST_NAME, loader_error, manifest_text
from apps.simulator.training_faults import REMOVED, checkpoint_listing, checkpoint_tree

MANIFEST = f"{CHECKPOINT_DIR}/SHA256SUMS"
HOT_TIER_DRIVES = 4  # the hot tier is a RAID0 of local NVMe drives
NVME_MODEL = "SAMSUNG MZQL27T6HBLA-00A07"
BOOT_MODEL = "SAMSUNG MZ1L2960HCJR-00A07"

# --- lsblk ------------------------------------------------------------------------------------------------------


def _device(name, size, kind, model, mountpoint, children=None) -> dict:
    device = {
        "name": name,
        "size": size,
        "type": kind,
        "model": model,
        "rota": False,
        "tran": "nvme" if kind == "disk" else None,
        "mountpoint": mountpoint,
    }
    if children:
        device["children"] = children
    return device


def block_devices(state: SimulatedNode) -> list[dict]:
    boot = 960_197_124_096
    devices = [
        _device(
            "nvme0n1",
            boot,
            "disk",
            BOOT_MODEL,
            None,
            [
                _device("nvme0n1p1", 1_127_219_200, "part", None, "/boot/efi"),
                _device("nvme0n1p2", boot - 1_128_267_776, "part", None, "/"),
            ],
        )
    ]
    hot = next((volume for volume in state.volumes if volume.kind == "hot"), None)
    if hot is not None:
        member = hot.capacity_gb * 10**9 // HOT_TIER_DRIVES
        array = _device("md0", member * HOT_TIER_DRIVES - 67_108_864, "raid0", None, hot.mount_point)
        devices += [
            _device(f"nvme{drive}n1", member, "disk", NVME_MODEL, None, [array])
            for drive in range(1, HOT_TIER_DRIVES + 1)
        ]
    return devices


def lsblk(context: Context, argv: list[str]) -> CommandOutput:
    if "-J" not in argv and "--json" not in argv:
        return fail(1, "lsblk: the simulator answers lsblk -J -b -o NAME,SIZE,TYPE,MODEL,ROTA,TRAN,MOUNTPOINT\n")
    return ok(util_linux_json({"blockdevices": block_devices(context.state)}) + "\n")


# --- df ---------------------------------------------------------------------------------------------------------


def _filesystem(volume: SimVolume) -> str:
    return {
        "system": "/dev/nvme0n1p2",
        "hot": "/dev/md0",
        "warm": f"10.30.0.10@o2ib:{volume.mount_point}",
        "cold": f"ckpt-gw:{volume.mount_point}",
    }.get(volume.kind, "/dev/nvme0n1p2")


def usage(context: Context, volume: SimVolume) -> tuple[int, int, int]:
    """(size, used, available) in bytes; a full volume has nothing left."""
    size = volume.capacity_gb * 10**9
    if volume.full:
        free = min(volume.freed_bytes, size)
        return size, size - free, free
    share = noise(context.seed, context.state.hostname, "df", volume.mount_point).uniform(0.08, 0.62)
    used = int(size * share)
    return size, used, size - used


def _human(value: int) -> str:
    for unit in ("", "K", "M", "G", "T", "P"):
        if value < 1024 or unit == "P":
            if unit and value < 10:
                return f"{value:.1f}{unit}"
            return f"{value:.0f}{unit}"
        value /= 1024
    return str(value)


def df(context: Context, argv: list[str]) -> CommandOutput:
    human = "-h" in argv
    scale = 1 if "-B1" in argv else 1024
    posix = "-P" in argv
    if human:
        size_header = "Size"
    elif scale == 1:
        size_header = "1-blocks" if posix else "1B-blocks"
    else:
        size_header = "1024-blocks" if posix else "1K-blocks"
    header = ["Filesystem", size_header, "Used", "Avail" if human else "Available", "Capacity" if posix else "Use%"]
    rows = []
    volumes = [SimVolume("/boot/efi", 1, "efi")] + context.state.volumes
    paths = [arg for arg in argv[1:] if not arg.startswith("-")]
    if paths:  # df PATH: the file system holding each path, as df prints it
        chosen = []
        for path in paths:
            if not path.startswith("/"):
                return fail(1, f"df: {path}: No such file or directory\n")
            holder = max(
                (v for v in volumes if path == v.mount_point or path.startswith(v.mount_point.rstrip("/") + "/")),
                key=lambda v: len(v.mount_point),
            )
            if holder not in chosen:
                chosen.append(holder)
        volumes = chosen
    mount_order = ["system", "efi", "hot", "warm", "cold"]  # the order the node mounts them at boot
    for volume in sorted(volumes, key=lambda volume: (mount_order.index(volume.kind), volume.mount_point)):
        if volume.kind == "efi":
            size, used, avail, source = 1_124_999_168, 6_422_528, 1_118_576_640, "/dev/nvme0n1p1"
        else:
            size, used, avail = usage(context, volume)
            source = _filesystem(volume)
        percent = f"{-(-used * 100 // size)}%"
        numbers = (
            [_human(size), _human(used), _human(avail)] if human else [str(-(-n // scale)) for n in (size, used, avail)]
        )
        rows.append([source, *numbers, percent, volume.mount_point])
    widths = [max(len(row[column]) for row in [header + ["Mounted on"], *rows]) for column in range(5)]
    lines = []
    for row in [header + ["Mounted on"], *rows]:
        cells = [row[0].ljust(widths[0])] + [row[column].rjust(widths[column]) for column in range(1, 5)]
        lines.append(" ".join(cells) + " " + row[5])
    return ok("\n".join(lines) + "\n")


# --- checkpoints ------------------------------------------------------------------------------------------------


def good_digest(checkpoint: SimCheckpoint) -> str:
    return hashlib.sha256(f"{checkpoint.path}:{checkpoint.size_bytes}".encode()).hexdigest()


def actual_digest(checkpoint: SimCheckpoint) -> str:
    """What sha256sum reads from the file now: a corrupt file (a torn write, a flipped block) hashes differently."""
    if checkpoint.corrupt:
        return hashlib.sha256(f"{checkpoint.path}:{checkpoint.size_bytes}:torn".encode()).hexdigest()
    return good_digest(checkpoint)


def manifest(state: SimulatedNode) -> str:
    return "".join(f"{good_digest(checkpoint)}  {checkpoint.path}\n" for checkpoint in state.checkpoints)


def _tree(context: Context, directory: str) -> dict:
    """The checkpoint directories of the run keeping `directory`, once per command ({}: none)."""
    key = ("checkpoint-tree", directory)
    if key not in context.memo:
        context.memo[key] = checkpoint_tree(context.hostname, directory) or {}
    return context.memo[key]


def read_storage_file(context: Context, path: str) -> str | None:
    if path == MANIFEST and context.state.checkpoints:
        return manifest(context.state)
    if path.endswith("/" + MANIFEST_NAME):
        directory = path.rsplit("/", 1)[0]
        files = _tree(context, directory.rsplit("/", 1)[0]).get(directory, [])
        if any(file.path == path for file in files):
            return manifest_text(files)
    return None


def _run_file(context: Context, path: str):
    """A file of a simulated training run's checkpoint (None: not one)."""
    directory = path.rsplit("/", 1)[0]
    files = _tree(context, directory.rsplit("/", 1)[0]).get(directory, [])
    return next((file for file in files if file.path == path), None)


def _checkpoint(state: SimulatedNode, path: str) -> SimCheckpoint | None:
    return next((checkpoint for checkpoint in state.checkpoints if checkpoint.path == path), None)


def sha256sum(context: Context, argv: list[str]) -> CommandOutput:
    args = [arg for arg in argv[1:] if arg not in ("-b", "--binary", "-t", "--text")]
    state = context.state
    if args[:1] in (["-c"], ["--check"]):
        return _check(context, args[1:])
    out, errors = [], []
    for path in args:
        checkpoint = _checkpoint(state, path)
        if checkpoint is not None:
            out.append(f"{actual_digest(checkpoint)}  {path}\n")
        elif (content := read_storage_file(context, path)) is not None:
            out.append(f"{hashlib.sha256(content.encode()).hexdigest()}  {path}\n")
        else:
            errors.append(f"sha256sum: {path}: No such file or directory\n")
    return CommandOutput(1 if errors else 0, "".join(out), "".join(errors))


def _check(context: Context, paths: list[str]) -> CommandOutput:
    if not paths or read_storage_file(context, paths[0]) is None:
        name = paths[0] if paths else "-"
        return fail(1, f"sha256sum: {name}: No such file or directory\n")
    out, failed, missing = [], 0, 0
    for line in read_storage_file(context, paths[0]).splitlines():
        expected, path = line.split("  ", 1)
        run_file = _run_file(context, path)
        if run_file is not None:
            good = run_file.digest == expected and run_file.size > 0
            out.append(f"{path}: {'OK' if good else 'FAILED'}\n")
            failed += 0 if good else 1
            continue
        checkpoint = _checkpoint(context.state, path)
        if checkpoint is None:
            out.append(f"{path}: FAILED open or read\n")
            missing += 1
        elif actual_digest(checkpoint) == expected:
            out.append(f"{path}: OK\n")
        else:
            out.append(f"{path}: FAILED\n")
            failed += 1
    errors = ""
    if missing:
        errors += f"sha256sum: WARNING: {missing} listed file{'s' if missing > 1 else ''} could not be read\n"
    if failed:
        errors += f"sha256sum: WARNING: {failed} computed checksum{'s' if failed > 1 else ''} did NOT match\n"
    return CommandOutput(1 if failed or missing else 0, "".join(out), errors)


def _ls_run_checkpoint(path: str, files, every: bool) -> CommandOutput:
    """ls -l[a] --time-style=+%s of one checkpoint directory of a simulated run (GNU ls' columns)."""
    entries = [(file.path.rsplit("/", 1)[1], file.size, "-rw-r--r-- 1") for file in files]
    if every:
        entries += [(".", 4096, "drwxr-xr-x 2"), ("..", 4096, "drwxr-xr-x 3")]
    else:
        entries = [entry for entry in entries if not entry[0].startswith(".")]
    entries.sort()  # byte order, as ls sorts under LC_ALL=C (what a non-interactive ssh session usually has)
    width = max(len(str(size)) for _, size, _ in entries)
    total = sum(-(-size // 1024) for _, size, _ in entries)
    lines = [f"total {total}"] + [
        f"{mode} train train {size:>{width}} Dec  1 08:00 {name}" for name, size, mode in entries
    ]
    return ok("\n".join(lines) + "\n")


def ls(context: Context, argv: list[str]) -> CommandOutput:
    flags = "".join(arg[1:] for arg in argv[1:] if arg.startswith("-") and not arg.startswith("--"))
    long = "l" in flags
    paths = [arg for arg in argv[1:] if not arg.startswith("-")] or ["."]
    written = None if long else checkpoint_listing(context.hostname, paths[0])  # a simulated training run's
    if written is not None:
        return ok("".join(path.rsplit("/", 1)[1] + "\n" for path in written))
    tree = checkpoint_tree(context.hostname, paths[0])
    if tree is not None and long:
        directory = paths[0].rstrip("/")
        if directory in tree:
            return _ls_run_checkpoint(directory, tree[directory], "a" in flags)
        return fail(2, f"ls: cannot access '{paths[0]}': No such file or directory\n")
    state = context.state
    entries = [(checkpoint.path.rsplit("/", 1)[1], checkpoint.size_bytes) for checkpoint in state.checkpoints]
    if entries:
        entries.append(("SHA256SUMS", len(manifest(state))))
    path = paths[0].rstrip("/")
    if path != CHECKPOINT_DIR or not entries:
        if path == "/checkpoints" and entries:
            return ok("drwxr-xr-x 2 train train 4096 Nov 30 08:50 llm-pretrain\n" if long else "llm-pretrain\n")
        return fail(2, f"ls: cannot access '{paths[0]}': No such file or directory\n")
    entries.sort()
    if not long:
        return ok("".join(f"{name}\n" for name, _ in entries))
    total = sum(-(-size // 1024) for _, size in entries)
    lines = [f"total {total}"]
    for name, size in entries:
        # A checkpoint every 1000 steps, ten minutes apart from 08:00; the manifest right after the last one.
        minute = 41 if name == "SHA256SUMS" else 10 * (int(name[5:12]) // 1000 - 1)
        lines.append(f"-rw-r--r-- 1 train train {size:>11} Nov 30 08:{minute:02d} {name}")
    return ok("\n".join(lines) + "\n")


def rm(context: Context, argv: list[str]) -> CommandOutput:
    """rm -rf [--] PATH...: a simulated training run's checkpoint directories; what they held is freed on their
    volume. -f: a path that is not there is no error (GNU rm)."""
    args = [arg for arg in argv[1:] if arg != "--"]
    flags = "".join(arg[1:] for arg in args if arg.startswith("-"))
    paths = [arg for arg in args if not arg.startswith("-")]
    if not paths:
        return fail(1, "rm: missing operand\nTry 'rm --help' for more information.\n")
    errors = []
    for path in paths:
        path = path.rstrip("/")
        directory = path.rsplit("/", 1)[0]
        tree = checkpoint_tree(context.hostname, directory) or {}
        if path in tree:
            if "r" not in flags:
                errors.append(f"rm: cannot remove '{path}': Is a directory\n")
                continue
            context.change(f"{REMOVED}{path}", sum(file.size for file in tree[path]))
        elif "f" not in flags:
            errors.append(f"rm: cannot remove '{path}': No such file or directory\n")
    return CommandOutput(1 if errors else 0, "", "".join(errors))


def load_check(context: Context, path: str) -> CommandOutput:
    """The catalogue's checkpoint load script on a simulated run's checkpoint: its entries, or the reader's error."""
    path = path.rstrip("/")
    tree = checkpoint_tree(context.hostname, path.rsplit("/", 1)[0])
    files = (tree or {}).get(path)
    head = 'Traceback (most recent call last):\n  File "<string>", line 5, in <module>\n'
    if files is None or not any(file.path.endswith("/.metadata") for file in files):
        problem = "missing" if files is None else "incomplete"
        return fail(1, head + "\n".join(loader_error(path, problem)[-5:]) + "\n")
    torn = [file for file in files if file.expected and file.digest != file.expected]
    if torn:
        head = 'Traceback (most recent call last):\n  File "<string>", line 7, in <module>\n'
        return fail(1, head + "\n".join(loader_error(path, "corrupt")) + "\n")
    shards = sum(1 for file in files if file.path.endswith(".distcp"))
    return ok(f"loaded {path}: {shards * 48} entries\n")


COMMANDS = {"lsblk": lsblk, "df": df, "sha256sum": sha256sum, "ls": ls, "rm": rm}
