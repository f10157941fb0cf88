"""`tail` on a simulated node: the end of a file the node has (a training run's log, a config, sysfs)."""

from apps.simulator.terminal import CommandOutput, Context, fail, ok
from apps.simulator.tools.system import read_file

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
    content = read_file(context, args[0])
    if content is None:
        return fail(1, f"tail: cannot open '{args[0]}' for reading: No such file or directory\n")
    lines = content.splitlines(keepends=True)
    return ok("".join(lines[-count:]) if count else "")


COMMANDS = {"tail": tail}
