"""The command catalogue: every command Rackpilot runs on a node, as an argv template.

Nothing typed by a user is pasted into a shell string. A value that must go into a command (an interface name, a
number of seconds) is checked against the strict pattern of its placeholder and then fills its argv element: the
whole element (`{interface}`), or its place in one plain word (`/sys/class/net/{interface}/mtu`, `--iters={n}`),
never script text; the ssh transport quotes every element with shlex.quote when it joins them for the remote shell.
register_command() refuses a template it could not fill as written (check_template).
"""

import functools
import posixpath
import re
import shlex
from dataclasses import dataclass, field

from django.conf import settings


class CommandError(ValueError):
    """A command or a value for it was refused."""

    def __init__(self, message: str, *, field_name: str | None = None):
        super().__init__(message)
        self.field_name = field_name


@dataclass(frozen=True)
class Placeholder:
    """A value's strict pattern (matched whole) and what it is, for the error that names the field.

    A placeholder is a whole argv element (`{interface}`) or part of one (`/sys/class/net/{interface}/mtu`,
    `--iters={nccl_iters}`). Inside a longer element a value is also one plain word, whatever its pattern admits: no
    whitespace or control character, no `/` unless `slashes` (a path placeholder), and no empty, `.` or `..` segment.
    """

    pattern: str
    description: str
    slashes: bool = False
    # A path a user gives is confined to what the feature reads: the setting naming the directories it must lie
    # under (checked whenever a command is built, so on every transport, not only where the value was typed).
    roots: str = ""

    def check(self, name: str, value) -> str:
        text = str(value)
        if not re.fullmatch(self.pattern, text):
            raise CommandError(f"{name}: {text!r} is not {self.description}", field_name=name)
        if self.roots:
            confine(text, setting=self.roots, name=name)
        return text

    def check_inside(self, name: str, value, element: str) -> str:
        text = self.check(name, value)
        problem = ""
        if not text:
            problem = "it is empty"
        elif any(character.isspace() or not character.isprintable() for character in text):
            problem = "it holds whitespace or a control character"
        elif "/" in text and not self.slashes:
            problem = "it holds a /"
        elif any(segment in ("", ".", "..") for segment in text.split("/")):
            problem = "it holds an empty, . or .. path segment"
        if problem:
            raise CommandError(f"{name}: {text!r} cannot go inside {element!r}: {problem}", field_name=name)
        return text


def root_directories(setting: str) -> list[str]:
    """The directories a confined path may lie under: the setting's absolute entries, normalised."""
    return [posixpath.normpath(entry) for entry in getattr(settings, setting) if entry.startswith("/")]


def confine(path: str, *, setting: str, name: str = "path") -> str:
    """`path` if it is absolute, already normal (no `.` or `..` segment, no `//`, no trailing `/`) and strictly under
    one of the directories the setting lists; CommandError naming the field and the directories otherwise. Checked
    on the text, so what is run is exactly what was judged (a `..` that a shell or the kernel would resolve never
    reaches either)."""
    text = str(path)
    if not text.startswith("/") or posixpath.normpath(text) != text or "/./" in f"{text}/" or "/../" in f"{text}/":
        raise CommandError(f"{name}: {text!r} is not a normal absolute path (no . or .. segments)", field_name=name)
    roots = root_directories(setting)
    if not any(text.startswith(root.rstrip("/") + "/") for root in roots):
        allowed = ", ".join(roots) or "none"
        raise CommandError(f"{name}: {text} is not under the directories {setting} allows ({allowed})", field_name=name)
    return text


# The only scripts Rackpilot hands to a shell or to Python (deployments run them; simulated nodes answer exactly
# these). Content and paths are positional arguments, never script text.
WRITE_FILE_SCRIPT = 'printf %s "$1" | base64 -d > "$2"'
PYTHON_VERSIONS_SCRIPT = (
    "import importlib.metadata as m\n"
    "for name in ('torch', 'tensorflow'):\n"
    "    try:\n"
    "        print(name, m.version(name))\n"
    "    except m.PackageNotFoundError:\n"
    "        print(name, 'missing')\n"
)
# Whether a PyTorch Distributed Checkpoint directory ($1) loads: its .metadata, then every tensor of every shard,
# on the CPU, without a process group (what a resume would read, before a resume is run from it).
CHECKPOINT_LOAD_SCRIPT = (
    "import sys\n"
    "import torch.distributed.checkpoint as dcp\n"
    "from torch.distributed.checkpoint.format_utils import _EmptyStateDictLoadPlanner\n"
    "reader = dcp.FileSystemReader(sys.argv[1])\n"
    "metadata = reader.read_metadata()\n"
    "state = {}\n"
    "dcp.load(state, storage_reader=reader, planner=_EmptyStateDictLoadPlanner(), no_dist=True)\n"
    "print(f'loaded {sys.argv[1]}: {len(metadata.state_dict_metadata)} entries')\n"
)
# Link settings, driver/firmware and PFC of several interfaces in one command (one connection, one matrix cell).
# $1 is a comma-separated list of checked interface names; globbing is off, so splitting it expands nothing. Each
# tool's stdout is framed by SECTION_MARK lines, its exit status and stderr follow it; an interface the node does
# not have is reported as absent rather than failing three tools.
SECTION_MARK = "@@rackpilot"

# A burn-in soak: nvidia-smi samples the GPUs every $2 ms into a temporary file while the load (gpu_burn for $1
# seconds, or dcgmi diag at level $1) runs; then the samples follow the load's own output after SOAK_SAMPLES_MARK.
# The load's exit status is the script's. The fields are fixed here (timestamped rows, so a slowdown after ten
# minutes is seen when it began).
SOAK_FIELDS = "timestamp,index,temperature.gpu,clocks.sm,power.draw,clocks_event_reasons.active"
SOAK_SAMPLES_MARK = f"{SECTION_MARK} nvidia-smi samples"


def _soak_script(load: str, fields: str = SOAK_FIELDS) -> str:
    return (
        "samples=$(mktemp) || exit 1\n"
        f'nvidia-smi --query-gpu={fields} --format=csv,nounits -lms "$2" -f "$samples" &\n'
        "sampler=$!\n"
        f"{load}\n"
        "status=$?\n"
        'kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null\n'
        f"echo '{SOAK_SAMPLES_MARK}'\n"
        'cat "$samples"; rm -f "$samples"\n'
        'exit "$status"\n'
    )


# Classic HPL (NVIDIA HPC-Benchmarks' hpl.sh, netlib HPL's input format): HPL.dat written to a temporary directory
# from the order $1, block $2 and grid $3 x $4 (one problem, one grid; the rest NVIDIA's sample-dat defaults), then
# $5 processes over the hosts $6 (host:slots,...), one per GPU. HPL.out goes to stdout (device 6).
HPL_DAT_LINES = (
    "HPLinpack benchmark input file",
    "Innovative Computing Laboratory, University of Tennessee",
    "HPL.out      output file name (if any)",
    "6            device out (6=stdout,7=stderr,file)",
    "1            # of problems sizes (N)",
    "$1           Ns",
    "1            # of NBs",
    "$2           NBs",
    "0            PMAP process mapping (0=Row-,1=Column-major)",
    "1            # of process grids (P x Q)",
    "$3           Ps",
    "$4           Qs",
    "16.0         threshold",
    "1            # of panel fact",
    "0            PFACTs (0=left, 1=Crout, 2=Right)",
    "1            # of recursive stopping criterium",
    "2            NBMINs (>= 1)",
    "1            # of panels in recursion",
    "2            NDIVs",
    "1            # of recursive panel fact.",
    "0            RFACTs (0=left, 1=Crout, 2=Right)",
    "1            # of broadcast",
    "3            BCASTs (0=1rg,1=1rM,2=2rg,3=2rM,4=Lng,5=LnM)",
    "1            # of lookahead depth",
    "1            DEPTHs (>=0)",
    "1            SWAP (0=bin-exch,1=long,2=mix)",
    "192          swapping threshold",
    "1            L1 in (0=transposed,1=no-transposed) form",
    "0            U  in (0=transposed,1=no-transposed) form",
    "1            Equilibration (0=no,1=yes)",
    "8            memory alignment in double (> 0)",
)
HPL_SCRIPT = (
    'dir=$(mktemp -d) || exit 1\ncat > "$dir/HPL.dat" <<EOF\n'
    + "\n".join(HPL_DAT_LINES)
    + '\nEOF\nmpirun --allow-run-as-root -np "$5" -H "$6" --bind-to none --map-by slot hpl.sh --dat "$dir/HPL.dat"\n'
    'status=$?\nrm -rf "$dir"\nexit "$status"\n'
)
# An Open MPI launch from a hostfile: the hosts $1 (host:slots,... checked by the mpi_hosts pattern) written on the
# launcher as a hostfile ("host slots=N" a line) in a temporary file, then `mpirun --hostfile FILE` with the rest of
# the arguments (mpirun's options and the program, each one quoted word). The file is removed however mpirun ends
# (a cancel's TERM reaches mpirun and this shell alike); mpirun's exit status is the script's.
MPIRUN_HOSTFILE_SCRIPT = (
    "hostfile=$(mktemp) || exit 1\n"
    "trap 'rm -f \"$hostfile\"' EXIT\n"
    "trap 'exit 143' TERM INT\n"
    "hosts=$1; shift\n"
    "set -f; IFS=,\n"
    'for entry in $hosts; do printf \'%s slots=%s\\n\' "${entry%%:*}" "${entry##*:}"; done > "$hostfile"\n'
    "unset IFS; set +f\n"
    'mpirun --hostfile "$hostfile" "$@"\n'
)
SOAK_SCRIPT = _soak_script('gpu_burn "$1"')
DCGM_SOAK_SCRIPT = _soak_script('dcgmi diag -r "$1"')
# A utilisation series of a running job's GPUs (runbook 2): the same sampler for $1 seconds with nothing of ours on
# the GPUs; the power limits show a cap below the default, the reasons why the clocks are held.
UTILISATION_FIELDS = (
    "timestamp,index,utilization.gpu,clocks.sm,clocks_event_reasons.active,power.draw,power.limit,"
    "power.default_limit,temperature.gpu"
)
UTILISATION_SCRIPT = _soak_script('sleep "$1"', UTILISATION_FIELDS)
NIC_FACTS_SCRIPT = (
    f"set -f; IFS=,\n"
    "for nic in $1; do\n"
    f'  if [ ! -e "/sys/class/net/$nic" ]; then printf \'{SECTION_MARK} absent %s\\n\' "$nic"; continue; fi\n'
    "  for tool in ethtool ethtool-i mlnx_qos; do\n"
    f'    printf \'{SECTION_MARK} %s %s\\n\' "$tool" "$nic"\n'
    "    case $tool in\n"
    '      ethtool) err=$(ethtool "$nic" 2>&1 >&3) ;;\n'
    '      ethtool-i) err=$(ethtool -i "$nic" 2>&1 >&3) ;;\n'
    '      mlnx_qos) err=$(mlnx_qos -i "$nic" 2>&1 >&3) ;;\n'
    "    esac 3>&1\n"
    f'    printf \'{SECTION_MARK} exit %s\\n%s\\n\' "$?" "$err"\n'
    "  done\n"
    "done\n"
)

# A training timeline read off a node (apps.benchmarks' timeline-trace kind): the file $1, at most $2 bytes, as
# base64 after a header line with its size, so the bytes (gzip included) cross the text channel intact and a cut-off
# transfer is seen. A missing, unreadable or too large file is refused before any of it is sent (exit 1, the reason
# on stderr).
TRACE_HEADER = "rackpilot-trace bytes"
TRACE_READ_SCRIPT = (
    "f=$1; max=$2\n"
    '[ -f "$f" ] || { printf \'%s: no such file\\n\' "$f" >&2; exit 1; }\n'
    '[ -r "$f" ] || { printf \'%s: not readable\\n\' "$f" >&2; exit 1; }\n'
    'size=$(wc -c < "$f") || exit 1\n'
    'if [ "$size" -gt "$max" ]; then printf \'%s: %s bytes, over %s\\n\' "$f" "$size" "$max" >&2; exit 1; fi\n'
    f"printf '{TRACE_HEADER} %s\\n' \"$size\"\n"
    'exec base64 < "$f"\n'
)

# Ends every process whose environment holds RACKPILOT_JOB=$1, with its process group: TERM, $2 seconds, KILL.
# `kill -s SIG -- -pgid` is the POSIX form that dash's kill understands too (`kill -TERM -- -pgid` is refused).
# Run by the reaper on the nodes of a shard whose worker was lost (not in the registry: no job kind runs it).
END_MARKED_SCRIPT = (
    'm="RACKPILOT_JOB=$1"; grace=$2; me=$$; groups=""\n'
    "for d in /proc/[0-9]*; do\n"
    '  [ "${d#/proc/}" = "$me" ] && continue\n'
    '  { tr "\\000" "\\n" < "$d/environ"; } 2>/dev/null | grep -qxF -e "$m" || continue\n'
    '  s=$(cat "$d/stat" 2>/dev/null) || continue\n'
    '  s=${s##*) }; set -- $s; groups="$groups $3"\n'
    "done\n"
    'for g in $groups; do kill -s TERM -- "-$g" 2>/dev/null; done\n'
    '[ -n "$groups" ] && sleep "$grace"\n'
    'for g in $groups; do kill -s KILL -- "-$g" 2>/dev/null; done\n'
    'echo "ended process groups:$groups"\n'
)
INTERFACE = r"[A-Za-z0-9][A-Za-z0-9_.:@-]{0,14}"
MAX_INTERFACES = 16  # in one "interfaces" value (a node's data NICs, with room to spare)
HOSTNAME = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,62})(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}))*"
# An absolute path of plain segments: none empty and none starting with a dot (so no `.`, `..` or hidden name).
PLAIN_PATH = r"(?:/[A-Za-z0-9_@+-][A-Za-z0-9_.@+-]{0,127}){1,32}"
FILE_PATH = r"/(?!\.\.(?:/|\Z))(?:[^\x00\n/]|/(?!/|\.\.(?:/|\Z))){0,4095}"

PLACEHOLDER_NAME = re.compile(r"[a-z][a-z0-9_]*")
# `{name}` in an argv element is a placeholder; `${name}` is a shell's parameter expansion (script text), never one.
_REFERENCE = re.compile(r"(?<!\$)\{([a-z][a-z0-9_]*)\}")
_SHELL_EXPANSION = re.compile(r"\$\{([a-z][a-z0-9_]*)\}")
# The literal text around a placeholder inside an element: one plain word (a path, an --option=, NAME=), so a value
# never lands in script text, quotes or a glob.
_PLAIN_WORD = re.compile(r"[A-Za-z0-9_./:=,+@%-]*")

# The registry of placeholders. nodeexec registers the generic ones below (what its own commands and several
# features use); a feature registers its own from the module that registers its commands, before them
# (register_placeholder). The patterns admit no shell metacharacters at all; quoting is a second, independent
# safeguard.
PLACEHOLDERS: dict[str, Placeholder] = {}


def register_placeholder(name: str, placeholder: Placeholder) -> Placeholder:
    """Add `{name}` to the registry. The same definition again is a no-op; another one under a taken name is refused."""
    if not PLACEHOLDER_NAME.fullmatch(name):
        raise CommandError(f"placeholder name {name!r}: lower-case letters, digits and _ only, starting with a letter")
    try:
        re.compile(placeholder.pattern)
    except re.error as error:
        raise CommandError(f"placeholder {{{name}}}: its pattern does not compile ({error})") from None
    existing = PLACEHOLDERS.get(name)
    if existing is not None and existing != placeholder:
        raise CommandError(f"placeholder {{{name}}} is already registered as {existing.description!r}")
    PLACEHOLDERS[name] = placeholder
    return placeholder


def get_placeholder(name: str) -> Placeholder:
    try:
        return PLACEHOLDERS[name]
    except KeyError:
        raise CommandError(f"no placeholder {{{name}}} is registered") from None


for _name, _placeholder in {
    "interface": Placeholder(INTERFACE, "a Linux interface name"),
    "interfaces": Placeholder(
        rf"{INTERFACE}(,{INTERFACE}){{0,{MAX_INTERFACES - 1}}}",
        f"up to {MAX_INTERFACES} interface names separated by commas",
    ),
    "seconds": Placeholder(r"[0-9]{1,6}(\.[0-9]{1,3})?", "a number of seconds"),
    "number": Placeholder(r"[0-9]{1,6}", "a whole number"),
    "gpu_index": Placeholder(r"[0-9]{1,2}", "a GPU index"),
    "gpus": Placeholder(r"[0-9]{1,2}", "a number of GPUs"),
    "interval_ms": Placeholder(r"[0-9]{1,7}", "a sampling interval in milliseconds"),
    "path": Placeholder(r"/[A-Za-z0-9_./-]{0,200}", "an absolute path of letters, digits, _ . / -", slashes=True),
    "base64": Placeholder(r"[A-Za-z0-9+/=]{0,262144}", "base64 text (file content)"),
    "marker": Placeholder(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,79}", "a command marker (<job public id>:<shard>)"),
    # What the runbooks and training progress read on a node: a training job's log, its checkpoints (files, hash
    # manifests, a load test). Typed by users on the training job, so confined to the directories those are for.
    "log_file": Placeholder(
        PLAIN_PATH,
        "an absolute path of plain segments (letters, digits, _ . @ + -)",
        slashes=True,
        roots="RACKPILOT_TRAINING_LOG_DIRS",
    ),
    "checkpoint_path": Placeholder(
        PLAIN_PATH,
        "an absolute path of plain segments (letters, digits, _ . @ + -)",
        slashes=True,
        roots="RACKPILOT_CHECKPOINT_DIRS",
    ),
    "scheduler_node": Placeholder(HOSTNAME, "a node name"),
}.items():
    register_placeholder(_name, _placeholder)


@dataclass(frozen=True)
class Command:
    """A catalogue entry: argv with `{placeholder}`s (whole elements, or inside a plain word), what it is for, and
    its timeout."""

    name: str
    argv: tuple[str, ...]
    description: str
    timeout: float = 60.0
    placeholders: tuple[str, ...] = field(default=())
    # Needs root (writes, or reads what only root may): a non-root login with sudo runs it as `sudo -n <argv>`.
    root: bool = False

    def matches(self, argv: list[str]) -> bool:
        """Whether `argv` is this command filled in (each placeholder matching its strict pattern)."""
        if len(argv) != len(self.argv):
            return False
        return all(
            re.fullmatch(_element_pattern(template), element) for template, element in zip(self.argv, argv, strict=True)
        )

    def build(self, **values) -> list[str]:
        missing = set(self.placeholders) - set(values)
        if missing:
            raise CommandError(f"{self.name} needs {', '.join(sorted(missing))}")
        unknown = set(values) - set(self.placeholders)
        if unknown:
            raise CommandError(f"{self.name} takes no {', '.join(sorted(unknown))}")
        checked = {name: get_placeholder(name).check(name, value) for name, value in values.items()}
        argv = []
        for element in self.argv:
            parts = _parts(element)
            if len(parts) == 1 and parts[0][1]:  # the whole element is the value
                argv.append(checked[parts[0][0]])
            else:
                argv.append(
                    "".join(
                        get_placeholder(text).check_inside(text, checked[text], element) if is_name else text
                        for text, is_name in parts
                    )
                )
        return argv


@functools.cache
def _parts(element: str) -> tuple[tuple[str, bool], ...]:
    """An argv element split into (literal text, False) and (placeholder name, True), in order."""
    parts, position = [], 0
    for reference in _REFERENCE.finditer(element):
        if reference.start() > position:
            parts.append((element[position : reference.start()], False))
        parts.append((reference.group(1), True))
        position = reference.end()
    if position < len(element) or not parts:
        parts.append((element[position:], False))
    return tuple(parts)


def _element_pattern(element: str) -> str:
    return "".join(
        f"(?:{PLACEHOLDERS[text].pattern})" if is_name else re.escape(text) for text, is_name in _parts(element)
    )


CATALOGUE: dict[str, Command] = {}


def check_template(command: Command) -> None:
    """Refuse, with a clear error, a command whose argv the executor could not fill as written: a `{placeholder}`
    it does not declare or nobody registered, one inside script text (only a plain word such as a path or an
    --option= may hold one), a shell's `${name}` for a declared placeholder, a declared one its argv never uses."""
    used = set()
    for element in command.argv:
        parts = _parts(element)
        names = [text for text, is_name in parts if is_name]
        for name in names:
            if name not in command.placeholders:
                raise CommandError(f"{command.name}: {{{name}}} in {element!r} is not one of its placeholders")
            if name not in PLACEHOLDERS:
                raise CommandError(
                    f"{command.name}: unknown placeholder {{{name}}}: register it (register_placeholder) first"
                )
        literal = "".join(text for text, is_name in parts if not is_name)
        if names and len(parts) > 1 and not _PLAIN_WORD.fullmatch(literal):
            raise CommandError(
                f"{command.name}: {{{names[0]}}} sits in {element[:60]!r}, which is not a plain word (a path, an "
                "--option=): give the value an argv element of its own (a script reads it as $1)"
            )
        for expansion in _SHELL_EXPANSION.finditer(element):
            if expansion.group(1) in command.placeholders:
                raise CommandError(
                    f"{command.name}: ${{{expansion.group(1)}}} is a shell expansion, not the placeholder: give the "
                    "value an argv element of its own (a script reads it as $1)"
                )
        used.update(names)
    unused = set(command.placeholders) - used
    if unused:
        raise CommandError(f"{command.name}: declares {', '.join(sorted(unused))} but its argv never uses them")


def register_command(command: Command) -> Command:
    check_template(command)
    CATALOGUE[command.name] = command
    return command


def get_command(name: str) -> Command:
    try:
        return CATALOGUE[name]
    except KeyError:
        raise CommandError(f"no command {name!r} in the catalogue") from None


def build(name: str, **values) -> list[str]:
    return get_command(name).build(**values)


def needs_root(argv: list[str]) -> bool:
    """Whether `argv` is one of the catalogue's root commands (matched on its template, not on its name)."""
    return any(command.root and command.matches(argv) for command in CATALOGUE.values())


def shell_join(argv: list[str]) -> str:
    """Join argv for a remote POSIX shell: every element quoted, so each stays one word and nothing expands."""
    return " ".join(shlex.quote(element) for element in argv)


# Not registered (see END_MARKED_SCRIPT): apps.jobs.orphans builds it for the reaper.
END_MARKED = Command(
    "end-marked",
    ("sh", "-c", END_MARKED_SCRIPT, "rackpilot-end-marked", "{marker}", "{seconds}"),
    "Ends the processes a lost worker left running (by their RACKPILOT_JOB marker) with their process groups.",
    timeout=60,
    placeholders=("marker", "seconds"),
)

for _command in (
    Command("true", ("true",), "Does nothing, successfully (fan-out benchmark).", timeout=30),
    Command("uname", ("uname", "-a"), "Kernel and architecture."),
    Command("hostname", ("hostname",), "The node's own host name."),
    Command("uptime", ("uptime",), "Load and time since boot."),
    Command("os-release", ("cat", "/etc/os-release"), "Distribution and version."),
    Command("nvidia-smi-list", ("nvidia-smi", "-L"), "GPUs with their UUIDs."),
    Command(
        "nvidia-smi-query",
        (
            "nvidia-smi",
            "--query-gpu=index,name,uuid,pci.bus_id,driver_version,memory.total,temperature.gpu,power.draw",
            "--format=csv,noheader,nounits",
        ),
        "GPU inventory and state as CSV.",
    ),
    Command("ip-link", ("ip", "-j", "link"), "Network interfaces as JSON."),
    Command(
        "ip-link-show",
        ("ip", "-j", "link", "show", "dev", "{interface}"),
        "One interface as JSON.",
        placeholders=("interface",),
    ),
    Command(
        "ethtool",
        ("ethtool", "{interface}"),
        "Link speed and link state of one interface.",
        placeholders=("interface",),
    ),
    Command(
        "ethtool-driver",
        ("ethtool", "-i", "{interface}"),
        "Driver, firmware and PCI address of one interface.",
        placeholders=("interface",),
    ),
    Command(
        "ethtool-stats",
        ("ethtool", "-S", "{interface}"),
        "A NIC's counters (drops, pause frames per priority, CRC errors, link-down events).",
        placeholders=("interface",),
    ),
    Command(
        "mlnx-qos",
        ("mlnx_qos", "-i", "{interface}"),
        "Trust mode and PFC priorities of a Mellanox interface.",
        placeholders=("interface",),
    ),
    Command("lscpu", ("lscpu", "-J"), "CPU and NUMA layout as JSON."),
    Command("free", ("free", "-b"), "Memory in bytes."),
    Command("df", ("df", "-P", "-B1"), "File systems and space."),
    Command(
        "dmidecode-product",
        ("dmidecode", "-s", "system-product-name"),
        "The server's product name from SMBIOS (dmidecode reads the DMI tables, which are root's).",
        root=True,
    ),
    Command(
        "sleep",
        ("sleep", "{seconds}"),
        "Waits (tests of cancel and crash handling).",
        timeout=24 * 3600,
        placeholders=("seconds",),
    ),
):
    register_command(_command)
