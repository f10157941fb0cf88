"""The catalogue commands storage tiering runs on the node that mounts both tiers: list the files not read for N
days (find), the files running processes hold open (lsof), create a destination directory, move one file, and read
one file back. File paths are whole argv elements after `--`; nothing is handed to a shell."""

from apps.nodeexec.catalogue import (
    CATALOGUE,
    FILE_PATH,
    Command,
    Placeholder,
    build,
    register_command,
    register_placeholder,
)

FIND_IDLE = "find-idle-files"
LIST_OPEN = "lsof-under"
MAKE_DIRS = "mkdir-parents"
MOVE_FILE = "mv-file"
STAT_FILE = "find-one-file"
# GNU find: size in bytes, access time in epoch seconds, the path; one file per line (names holding a newline are
# left out, since a line could not carry them).
PRINTF = "%s %A@ %p\\n"
NO_NEWLINE_NAMES = ("!", "-name", "*\n*")
# How old (days) and how large (bytes) a file must be to move, and the files themselves. A file's name is whatever
# its owner chose (spaces, quotes, $ and ; included), so `file`/`file_to` admit any character but NUL and newline,
# never a `..` segment: such a value is only ever one argv element after `--`, and the ssh transport's quoting keeps
# it one word.
PLACEHOLDERS = {
    "directory": Placeholder(
        r"/(?:[A-Za-z0-9_-][A-Za-z0-9_.-]{0,63}/){0,12}[A-Za-z0-9_-][A-Za-z0-9_.-]{0,63}",
        "an absolute directory path",
        slashes=True,
    ),
    "older_than_days": Placeholder(r"\+[0-9]{1,5}", "+N (more than N whole days, find -atime)"),
    "larger_than_bytes": Placeholder(r"\+[0-9]{1,15}c", "+Nc (more than N bytes, find -size)"),
    "file": Placeholder(FILE_PATH, "an absolute file path without newlines or .. segments", slashes=True),
    "file_to": Placeholder(FILE_PATH, "an absolute file path without newlines or .. segments", slashes=True),
}
for _name, _placeholder in PLACEHOLDERS.items():
    register_placeholder(_name, _placeholder)

COMMANDS = (
    Command(
        FIND_IDLE,
        (
            "find",
            "{directory}",
            "-xdev",
            "-type",
            "f",
            "-atime",
            "{older_than_days}",
            "-size",
            "{larger_than_bytes}",
            *NO_NEWLINE_NAMES,
            "-printf",
            PRINTF,
        ),
        "Files under a directory (one file system) not read for more than N days and larger than N bytes.",
        timeout=900.0,
        placeholders=("directory", "older_than_days", "larger_than_bytes"),
        root=True,
    ),
    Command(
        LIST_OPEN,
        ("lsof", "-w", "-F", "pcfn", "+D", "{directory}"),
        "Every file under a directory that a process holds open, with the process (lsof field output).",
        timeout=900.0,
        placeholders=("directory",),
        root=True,
    ),
    Command(
        MAKE_DIRS,
        ("mkdir", "-p", "--", "{file}"),
        "Create a directory and its parents (where a moved file goes).",
        placeholders=("file",),
        root=True,
    ),
    Command(
        MOVE_FILE,
        ("mv", "-n", "-T", "--", "{file}", "{file_to}"),
        "Move one file to another tier; never over an existing file (-n), never into a directory of that name (-T).",
        timeout=3600.0,
        placeholders=("file", "file_to"),
        root=True,
    ),
    Command(
        STAT_FILE,
        ("find", "{file}", "-maxdepth", "0", "-type", "f", "-printf", PRINTF),
        "One file's size and access time (to verify a move).",
        placeholders=("file",),
        root=True,
    ),
)
for _command in COMMANDS:
    if _command.name not in CATALOGUE:
        register_command(_command)


def find_idle_values(directory: str, *, days: int, min_bytes: int) -> dict[str, str]:
    """find -atime +N is more than N *whole* days since the last read, so unread for `days` days is +(days − 1);
    -size +Nc is more than N bytes, so at least `min_bytes` (and never an empty file) is +(min_bytes − 1)c."""
    return {
        "directory": directory,
        "older_than_days": f"+{max(int(days) - 1, 0)}",
        "larger_than_bytes": f"+{max(int(min_bytes) - 1, 0)}c",
    }


def find_idle_argv(directory: str, *, days: int, min_bytes: int) -> list[str]:
    return build(FIND_IDLE, **find_idle_values(directory, days=days, min_bytes=min_bytes))


def list_open_argv(directory: str) -> list[str]:
    return build(LIST_OPEN, directory=directory)


def make_dirs_argv(directory: str) -> list[str]:
    return build(MAKE_DIRS, file=directory)


def move_argv(source: str, destination: str) -> list[str]:
    return build(MOVE_FILE, file=source, file_to=destination)


def stat_argv(path: str) -> list[str]:
    return build(STAT_FILE, file=path)
