"""Capture what the tools Rackpilot reads print on this host, anonymised, as new parser fixtures.

`manage.py capture_node OUTDIR` calls `capture`. OUTDIR is meant to be copied to tests/fixtures/real/<name>/, where
tests/parsers/test_every_fixture.py parses every file with the parser its name selects; so every file is given a name
`registry.tool_for_fixture` maps to the right parser, and is parsed here exactly as that test will parse it before it
is written. An output that does not parse is kept in OUTDIR/rejected/ for inspection (never copy that folder).

Every command is read-only, runs from an argv list (never a shell string) with a timeout and LANG=C. A missing tool
or a non-zero exit is recorded in words and writes nothing. Identifiers are replaced by placeholders of the same
shape (see Anonymiser), with one mapping for the whole capture so a GPU keeps its placeholder across files.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from apps.core.text import counted
from apps.discovery.facts import tool_failure
from apps.nodeexec.catalogue import MAX_INTERFACES, PLACEHOLDERS
from apps.parsers import network, nvidia_smi, registry
from apps.parsers.common import clean, decode_bytes
from apps.parsers.errors import ParseError

TIMEOUT_SECONDS = 30.0
REJECTED = "rejected"
HOST_PLACEHOLDER = "node01"
# ip, ethtool and ibstat live in sbin, which a non-root PATH often lacks.
EXTRA_PATH = ("/usr/local/sbin", "/usr/sbin", "/sbin")
INTERFACE = re.compile(rf"^(?:{PLACEHOLDERS['interface'].pattern})\Z")

WRITTEN, SKIPPED, REJECTED_STATUS = "written", "skipped", "rejected"


class CaptureError(Exception):
    """The capture cannot start (OUTDIR not empty, a bad interface name)."""


@dataclass(frozen=True)
class CaptureCommand:
    """One read-only command, the fixture file its output becomes, and the parser that file must satisfy."""

    filename: str
    argv: tuple[str, ...]
    parser: str
    optional: bool = False  # captured where the tool exists (InfiniBand, Mellanox, DCGM hosts)
    timeout: float = TIMEOUT_SECONDS

    @property
    def tool(self) -> str:
        return self.argv[0]

    @property
    def display(self) -> str:
        return " ".join(self.argv)

    @property
    def short_display(self) -> str:
        """The command with any very long argument (the --query-gpu field list) cut short, for one-line reports."""
        return " ".join(arg if len(arg) <= 40 else f"{arg[:32]}..." for arg in self.argv)


def node_commands() -> tuple[CaptureCommand, ...]:
    """The node-wide commands, nvidia-smi -L before the others so GPU 0's UUID gets the first placeholder."""
    query = f"--query-gpu={','.join(nvidia_smi.QUERY_GPU_FIELDS)}"
    q_sections = "PERFORMANCE,CLOCK,POWER,TEMPERATURE,ECC,PAGE_RETIREMENT,ROW_REMAPPER"
    return (
        CaptureCommand("nvidia-smi-L.txt", ("nvidia-smi", "-L"), "nvidia_smi_list"),
        CaptureCommand("nvidia-smi.txt", ("nvidia-smi",), "nvidia_smi_table"),
        CaptureCommand("nvidia-smi-q.txt", ("nvidia-smi", "-q"), "nvidia_smi_q"),
        CaptureCommand("nvidia-smi-q-x.xml", ("nvidia-smi", "-q", "-x"), "nvidia_smi_xml"),
        CaptureCommand("nvidia-smi-query-gpu.csv", ("nvidia-smi", query, "--format=csv"), "nvidia_smi_query"),
        CaptureCommand(
            "nvidia-smi-query-gpu-noheader-nounits.csv",
            ("nvidia-smi", query, "--format=csv,noheader,nounits"),
            "nvidia_smi_query",
        ),
        CaptureCommand(
            "nvidia-smi-q-d-perf-clock-power-temp-ecc.txt", ("nvidia-smi", "-q", "-d", q_sections), "nvidia_smi_q"
        ),
        CaptureCommand("nvidia-smi-topo-m.txt", ("nvidia-smi", "topo", "-m"), "nvidia_smi_topo"),
        CaptureCommand("nvidia-smi-nvlink-s.txt", ("nvidia-smi", "nvlink", "-s"), "nvidia_smi_nvlink"),
        CaptureCommand("nvidia-smi-dmon-idle.txt", ("nvidia-smi", "dmon", "-c", "3"), "nvidia_smi_dmon"),
        CaptureCommand("dcgmi-discovery-l.txt", ("dcgmi", "discovery", "-l"), "dcgm_discovery", optional=True),
        CaptureCommand("lscpu.txt", ("lscpu",), "lscpu"),
        CaptureCommand("lscpu.json", ("lscpu", "-J"), "lscpu"),
        CaptureCommand("numactl-H.txt", ("numactl", "-H"), "numactl"),
        CaptureCommand("proc-meminfo.txt", ("cat", "/proc/meminfo"), "meminfo"),
        CaptureCommand("lsblk.json", ("lsblk", "-J", "-b", "-o", "NAME,SIZE,TYPE,MODEL,ROTA,TRAN,MOUNTPOINT"), "lsblk"),
        CaptureCommand("ip-j-link.json", ("ip", "-j", "link"), "ip_link"),
        CaptureCommand("ibstat.txt", ("ibstat",), "ibstat", optional=True),
    )


def interface_commands(interface: str) -> tuple[CaptureCommand, ...]:
    return (
        CaptureCommand(f"ethtool-{interface}.txt", ("ethtool", interface), "ethtool"),
        CaptureCommand(f"ethtool-i-{interface}.txt", ("ethtool", "-i", interface), "ethtool_driver"),
        CaptureCommand(f"mlnx_qos-{interface}.txt", ("mlnx_qos", "-i", interface), "mlnx_qos", optional=True),
    )


def check_interface_names(names: Iterable[str]) -> list[str]:
    """The names, checked against the catalogue's interface pattern (they become argv elements and file names)."""
    names = list(names)
    bad = [name for name in names if not INTERFACE.match(name)]
    if bad:
        raise CaptureError(f"not a Linux interface name: {', '.join(repr(name) for name in bad)}")
    if len(names) > MAX_INTERFACES:
        raise CaptureError(f"at most {MAX_INTERFACES} interfaces, not {len(names)}")
    return names


def interfaces_from_ip_link(text: str) -> list[str]:
    """Every interface `ip -j link` lists except loopback, at most MAX_INTERFACES, in its order."""
    links = network.parse_ip_link(text).links
    names = [
        link.name
        for link in links
        if link.link_type != "loopback" and "LOOPBACK" not in link.flags and INTERFACE.match(link.name)
    ]
    return names[:MAX_INTERFACES]


# --- running ----------------------------------------------------------------------------------------------------


@dataclass
class Output:
    """What one command gave: its stdout when it ran and exited 0, else why not."""

    command: CaptureCommand
    text: str | None = None
    reason: str = ""
    seconds: float = 0.0
    timed_out: bool = False


def command_env() -> dict[str, str]:
    env = dict(os.environ, LANG="C", LC_ALL="C")
    parts = env.get("PATH", "").split(os.pathsep)
    env["PATH"] = os.pathsep.join(parts + [extra for extra in EXTRA_PATH if extra not in parts])
    return env


def run_command(command: CaptureCommand, env: dict[str, str]) -> Output:
    executable = shutil.which(command.tool, path=env["PATH"])
    if executable is None:
        return Output(command, reason=f"{command.tool} is not installed")
    started = time.monotonic()
    try:
        done = subprocess.run(
            [executable, *command.argv[1:]],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=command.timeout,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return Output(command, reason=f"timed out after {command.timeout:g} s", seconds=command.timeout, timed_out=True)
    except OSError as error:
        return Output(command, reason=f"cannot run {command.tool}: {error.strerror or error}")
    seconds = time.monotonic() - started
    if done.returncode != 0:
        return Output(command, reason=exit_reason(command, done), seconds=seconds)
    return Output(command, text=decode_bytes(done.stdout), seconds=seconds)


def exit_reason(command: CaptureCommand, done: subprocess.CompletedProcess) -> str:
    if done.returncode < 0:
        return f"{command.tool} was killed by signal {-done.returncode}"
    return tool_failure(command.tool, done.returncode, decode_bytes(done.stderr or done.stdout))


def run_all(commands: Iterable[CaptureCommand], env: dict[str, str]) -> list[Output]:
    """Run each command; once a tool has timed out its other commands are skipped (a hung driver would otherwise
    cost a timeout per command)."""
    hung: set[str] = set()
    outputs = []
    for command in commands:
        if command.tool in hung:
            outputs.append(Output(command, reason=f"an earlier {command.tool} command timed out"))
            continue
        output = run_command(command, env)
        if output.timed_out:
            hung.add(command.tool)
        outputs.append(output)
    return outputs


# --- anonymisation ----------------------------------------------------------------------------------------------

UUID = re.compile(r"\b(?:(GPU|MIG)-)?([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\b", re.IGNORECASE)
# "Serial Number : X" (nvidia-smi -q, also "Chassis Serial Number"), <serial>X</serial> and <*serial*> in -q -x.
SERIAL_LINE = re.compile(r"^[ \t]*[\w ]*Serial Number[ \t]*:[ \t]*(\S[^\n]*?)[ \t]*$", re.IGNORECASE | re.MULTILINE)
SERIAL_XML = re.compile(r"<(\w*serial\w*)>\s*([^<]*?)\s*</\1>", re.IGNORECASE)
QUERY_ROW = re.compile(r"^\d+, (?:GPU|MIG)-[0-9a-fA-F-]{36}, ")
# GPU PDI (per-device identifier), GPU fabric GUID, InfiniBand node / system image / port GUIDs.
HEX_ID_LINE = re.compile(r"(?:\bPDI|GUID)[ \t]*:[ \t]*0x([0-9a-f]{8,16})\b", re.IGNORECASE)
HEX_ID_XML = re.compile(r"<(\w*pdi\w*|\w*guid\w*)>\s*0x([0-9a-f]{8,16})\s*</\1>", re.IGNORECASE)
HEX_ID = re.compile(r"\b0x([0-9a-f]{8,16})\b", re.IGNORECASE)
MAC = re.compile(r"(?<![0-9a-f:])(?:[0-9a-f]{2}:){5}[0-9a-f]{2}(?![0-9a-f:])", re.IGNORECASE)
# An IPoIB hardware address: 4 bytes of flags and QPN, 8 of subnet prefix, 8 of port GUID.
IB_ADDRESS = re.compile(r"(?<![0-9a-f:])((?:[0-9a-f]{2}:){12})((?:[0-9a-f]{2}:){7}[0-9a-f]{2})(?![0-9a-f:])", re.I)
IB_BROADCAST_PREFIX = "00:ff:ff:ff:ff:"
HOME = re.compile(r"/home/[^/\s\"'<>|]+")
NOT_HOST_NAMES = {"", "localhost", "localhost.localdomain", "localdomain"}
MIN_SERIAL_LENGTH = 4  # a shorter "serial" is a placeholder or a flag; replacing it everywhere would wreck the text


@dataclass
class Anonymiser:
    """The identifiers seen so far and their placeholders; share one across all files of a capture.

    Each map is keyed by the lower-case original and filled in order of first appearance, so the first GPU UUID seen
    becomes ...0001. Kept as they are: PCI bus IDs, board and module IDs, part numbers, VBIOS and firmware versions
    (they name a model or a slot, not a machine).
    """

    hostnames: tuple[str, ...] = ()
    uuids: dict[str, str] = field(default_factory=dict)
    serials: dict[str, str] = field(default_factory=dict)
    hex_ids: dict[str, str] = field(default_factory=dict)  # hex digits without 0x → as many hex digits
    macs: dict[str, str] = field(default_factory=dict)

    @classmethod
    def for_this_host(cls) -> Anonymiser:
        return cls(hostnames=(socket.getfqdn(), socket.gethostname()))

    # learning: collect identifiers, give each a placeholder

    def learn(self, text: str) -> None:
        for match in UUID.finditer(text):
            self._uuid_body(match[2])
        for value in self._serial_values(text):
            self._serial(value)
        for match in (*HEX_ID_LINE.finditer(text), *HEX_ID_XML.finditer(text)):
            self._hex_id(match.groups()[-1])
        for match in MAC.finditer(text):
            self._mac(match[0])
        for match in IB_ADDRESS.finditer(text):
            if not match[0].lower().startswith(IB_BROADCAST_PREFIX):
                self._hex_id(match[2].replace(":", ""))

    def _serial_values(self, text: str) -> list[str]:
        values = [match[1] for match in SERIAL_LINE.finditer(text)]
        values += [match[2] for match in SERIAL_XML.finditer(text)]
        values += serial_column(text)
        return [value for value in values if clean(value) and len(value) >= MIN_SERIAL_LENGTH]

    @staticmethod
    def _numbered(table: dict[str, str], value: str, make: Callable[[int], str]) -> str:
        """value's placeholder in table; the n-th distinct value (case aside) gets make(n) the first time."""
        key = value.lower()
        if key not in table:
            table[key] = make(len(table) + 1)
        return table[key]

    def _uuid_body(self, body: str) -> str:
        return self._numbered(self.uuids, body, lambda n: f"00000000-0000-0000-0000-{n:012d}")

    def _serial(self, value: str) -> str:
        return self._numbered(self.serials, value, lambda n: str(n).zfill(len(value)))

    def _hex_id(self, digits: str) -> str:
        return self._numbered(self.hex_ids, digits, lambda n: f"{n:0{len(digits)}x}")

    def _mac(self, mac: str) -> str:
        if mac.lower() in {"00:00:00:00:00:00", "ff:ff:ff:ff:ff:ff"}:
            return mac
        # 02: a locally administered address, never a vendor's
        return self._numbered(
            self.macs, mac, lambda n: f"02:00:00:{n >> 16 & 0xFF:02x}:{n >> 8 & 0xFF:02x}:{n & 0xFF:02x}"
        )

    # applying: replace every occurrence, learnt from any file

    def apply(self, text: str) -> str:
        text = UUID.sub(self._replace_uuid, text)
        text = self._replace_serials(text)
        text = IB_ADDRESS.sub(self._replace_ib_address, text)
        text = HEX_ID.sub(self._replace_hex_id, text)
        text = MAC.sub(lambda match: self._mac(match[0]), text)
        text = self._replace_hostnames(text)
        return HOME.sub("/home/user", text)

    def _replace_uuid(self, match: re.Match) -> str:
        prefix = f"{match[1]}-" if match[1] else ""
        return prefix + self._uuid_body(match[2])

    def _replace_serials(self, text: str) -> str:
        if not self.serials:
            return text
        values = sorted(self.serials, key=len, reverse=True)
        pattern = re.compile(r"(?<![0-9a-z-])(?:" + "|".join(map(re.escape, values)) + r")(?![0-9a-z-])", re.IGNORECASE)
        return pattern.sub(lambda match: self.serials[match[0].lower()], text)

    def _replace_ib_address(self, match: re.Match) -> str:
        if match[0].lower().startswith(IB_BROADCAST_PREFIX):
            return match[0]
        guid = self._hex_id(match[2].replace(":", ""))
        return match[1] + ":".join(guid[i : i + 2] for i in range(0, 16, 2))

    def _replace_hex_id(self, match: re.Match) -> str:
        placeholder = self.hex_ids.get(match[1].lower())
        return f"0x{placeholder}" if placeholder else match[0]

    def _replace_hostnames(self, text: str) -> str:
        names = sorted({name for name in self.hostnames if name.lower() not in NOT_HOST_NAMES}, key=len, reverse=True)
        if not names:
            return text
        pattern = re.compile(r"(?<![\w.-])(?:" + "|".join(map(re.escape, names)) + r")(?![\w-])", re.IGNORECASE)
        return pattern.sub(HOST_PLACEHOLDER, text)

    def counts(self) -> dict[str, int]:
        return {
            "UUIDs": len(self.uuids),
            "serial numbers": len(self.serials),
            "PDIs/GUIDs": len(self.hex_ids),
            "MAC addresses": len(self.macs),
        }


def serial_column(text: str) -> list[str]:
    """Serials from --query-gpu CSV: the 'serial' header column, or in header-less rows the column QUERY_GPU_FIELDS
    puts it in."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return []
    header = [cell.strip() for cell in lines[0].split(",")]
    if "serial" in header:
        column, rows = header.index("serial"), lines[1:]
    else:
        column, rows = nvidia_smi.QUERY_GPU_FIELDS.index("serial"), [line for line in lines if QUERY_ROW.match(line)]
    cells = [[cell.strip() for cell in row.split(",")] for row in rows]
    return [row[column] for row in cells if len(row) > column]


def anonymise(text: str, mapping: Anonymiser) -> str:
    """``text`` with its identifiers replaced; ``mapping`` learns the new ones, so pass the same one for every file."""
    mapping.learn(text)
    return mapping.apply(text)


# --- checking: what tests/parsers/test_every_fixture.py will check -----------------------------------------------


def fixture_problem(path: Path, text: str, parser: str) -> str | None:
    """Why ``text`` saved as ``path`` would fail the every-fixture test, or None when it passes."""
    try:
        tool = registry.tool_for_fixture(path)
    except LookupError:
        return f"no rule in apps/parsers/registry.py FIXTURE_RULES maps {path.name} (it needs {parser})"
    if tool != parser:
        return f"FIXTURE_RULES maps {path.name} to {tool}, not {parser}"
    try:
        data = registry.parse(tool, text).to_dict()
    except ParseError as error:
        return f"parse error: {error}"
    except Exception as error:  # a parser crash is a finding to report, not a reason to lose the capture
        return f"the {tool} parser crashed: {error!r}"
    if not data or json.loads(json.dumps(data)) != data:
        return f"the {tool} parser returned no plain-JSON result"
    detected = registry.detect_tool(text, filename=str(path))
    if text.strip() and detected != tool:
        return f"detect_tool says {detected}, the file name says {tool}"
    if not text.strip() and detected is not None:
        return f"detect_tool names {detected} for empty output"
    return None


# --- the capture ------------------------------------------------------------------------------------------------


@dataclass
class Outcome:
    command: CaptureCommand
    status: str  # written, skipped or rejected
    reason: str = ""
    seconds: float = 0.0
    path: Path | None = None


@dataclass
class CaptureReport:
    outdir: Path
    started: datetime
    interfaces: list[str]
    outcomes: list[Outcome]
    anonymised: dict[str, int]

    def with_status(self, status: str) -> list[Outcome]:
        return [outcome for outcome in self.outcomes if outcome.status == status]

    @property
    def captured_anything(self) -> bool:
        return any(outcome.status != SKIPPED for outcome in self.outcomes)


def require_empty(outdir: Path) -> None:
    if outdir.exists() and (not outdir.is_dir() or any(outdir.iterdir())):
        raise CaptureError(f"{outdir} exists and is not empty: choose a new folder (nothing is overwritten)")


def capture(
    outdir: str | Path,
    *,
    interfaces: list[str] | None = None,
    mapping: Anonymiser | None = None,
) -> CaptureReport:
    """Run every capture command on this host, anonymise, check and write the outputs and README.md into outdir."""
    outdir = Path(outdir)
    require_empty(outdir)
    if interfaces is not None:
        interfaces = check_interface_names(interfaces)
    started = datetime.now(UTC)
    env = command_env()
    outputs = run_all(node_commands(), env)
    if interfaces is None:
        interfaces = _interfaces_listed(outputs)
    outputs += run_all([command for name in interfaces for command in interface_commands(name)], env)
    mapping = mapping or Anonymiser.for_this_host()
    for output in outputs:  # learn from every file before writing any: one placeholder per value everywhere
        if output.text is not None:
            mapping.learn(output.text)
    outdir.mkdir(parents=True, exist_ok=True)
    outcomes = [write_output(outdir, output, mapping) for output in outputs]
    report = CaptureReport(outdir, started, interfaces, outcomes, mapping.counts())
    (outdir / "README.md").write_text(readme(report), encoding="utf-8")
    return report


def _interfaces_listed(outputs: list[Output]) -> list[str]:
    text = next((o.text for o in outputs if o.command.parser == "ip_link" and o.text is not None), None)
    if text is None:
        return []
    try:
        return interfaces_from_ip_link(text)
    except ParseError:
        return []  # the ip-j-link file itself is rejected with the reason


def write_output(outdir: Path, output: Output, mapping: Anonymiser) -> Outcome:
    """Anonymise and check one output, then write it into outdir, or into outdir/rejected/ when it would fail the
    every-fixture test; a command that gave no output writes nothing."""
    command = output.command
    if output.text is None:
        return Outcome(command, SKIPPED, output.reason, output.seconds)
    text = mapping.apply(output.text)
    path = outdir / command.filename
    problem = fixture_problem(path, text, command.parser)
    if problem:
        path = outdir / REJECTED / command.filename
        path.parent.mkdir(exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return Outcome(command, REJECTED_STATUS if problem else WRITTEN, problem or "", output.seconds, path)


# --- README -----------------------------------------------------------------------------------------------------


def _read_back(report: CaptureReport, filename: str) -> str | None:
    outcome = next((o for o in report.with_status(WRITTEN) if o.command.filename == filename), None)
    return outcome.path.read_text(encoding="utf-8") if outcome else None


def gpu_line(report: CaptureReport) -> str:
    text = _read_back(report, "nvidia-smi-q.txt")
    if text is None:
        return "GPUs: none read (nvidia-smi -q did not run; see below)."
    gpus = nvidia_smi.parse_query_text(text)
    kinds = Counter(f"{gpu.name} ({gpu.memory_total_mib or 0:g} MiB)" for gpu in gpus.gpus)
    listed = ", ".join(f"{count} x {kind}" for kind, count in kinds.items()) or "no GPU"
    return f"GPUs: {listed}; driver {gpus.driver_version}, CUDA {gpus.cuda_version} (as nvidia-smi -q reads them)."


def cpu_line(report: CaptureReport) -> str:
    text = _read_back(report, "lscpu.json") or _read_back(report, "lscpu.txt")
    if text is None:
        return "CPU: not read (lscpu did not run)."
    cpu = registry.parse("lscpu", text)
    return (
        f"CPU: {cpu.model_name}, {cpu.cpus} CPUs, {counted(cpu.sockets, 'socket')}, "
        f"{counted(cpu.numa_nodes, 'NUMA node')}"
        + (f", hypervisor {cpu.hypervisor}" if cpu.hypervisor else "")
        + " (lscpu)."
    )


def readme(report: CaptureReport) -> str:
    when = report.started.strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"# A real node, captured {when}",
        "",
        gpu_line(report),
        cpu_line(report),
        f"Interfaces read: {', '.join(report.interfaces) or 'none'}.",
        "",
        "Every file is the verbatim output of the command named below, run read-only on that machine with LANG=C "
        "by `manage.py capture_node`, except for the anonymisation described at the end. Each was parsed with the "
        "parser `apps.parsers.registry.tool_for_fixture` picks for its name before it was written.",
        "",
        "| file | command |",
        "|---|---|",
        *(f"| {o.command.filename} | `{o.command.display}` |" for o in report.with_status(WRITTEN)),
    ]
    skipped = report.with_status(SKIPPED)
    if skipped:
        lines += ["", "## Not captured", "", "| command | why |", "|---|---|"]
        lines += [f"| `{o.command.short_display}` | {_cell(o.reason)} |" for o in skipped]
    rejected = report.with_status(REJECTED_STATUS)
    if rejected:
        lines += [
            "",
            f"## Rejected: kept in {REJECTED}/ for inspection, not fixtures (do not copy that folder)",
            "",
            "| file | command | why |",
            "|---|---|---|",
        ]
        lines += [f"| {o.command.filename} | `{o.command.short_display}` | {_cell(o.reason)} |" for o in rejected]
    counts = ", ".join(f"{count} {what}" for what, count in report.anonymised.items())
    lines += [
        "",
        "## Anonymisation",
        "",
        "GPU (and MIG and any other) UUIDs are replaced by `GPU-00000000-0000-0000-0000-000000000001`, ... in order of "
        "first appearance (GPU 0 first); GPU and chassis serial numbers by digit strings of the same length; the GPU "
        "PDI and fabric / InfiniBand GUIDs by `0x0000000000000001`, ... of the same length; MAC addresses by "
        "`02:00:00:00:00:01`, ... (all-zero and broadcast addresses kept), and the GUID part of InfiniBand hardware "
        f"addresses likewise; the host name and FQDN by `{HOST_PLACEHOLDER}`; `/home/<user>` by `/home/user`. One "
        "value gets the same placeholder in every file. Kept as read: PCI bus IDs, board and module IDs, part "
        f"numbers, VBIOS and firmware versions (they name a model or a slot, not a machine). Replaced here: {counts}.",
        "",
    ]
    return "\n".join(lines)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
