"""Outputs a deployment reads to check a node's setup: df -P, chronyc tracking, ipmitool mc info, ethtool -l,
nvcc --version, mpirun --version, dpkg-query -W -f=${Version}, and the two-line package versions script."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .common import Result, require_content, unexpected
from .errors import ParseError

# --- df -P -------------------------------------------------------------------------------------------------------


@dataclass
class FileSystem(Result):
    source: str
    size_bytes: int
    used_bytes: int
    available_bytes: int
    use_pct: int
    mount_point: str


@dataclass
class FileSystems(Result):
    file_systems: list[FileSystem]


def parse_df(text: str) -> FileSystems:
    """`df -P -B1`: a header, then one line per file system (sizes in bytes)."""
    lines = require_content(text, "df -P output")
    rows = [(number, line) for number, line in enumerate(lines, start=1) if line.strip()]
    number, header = rows[0]
    if not header.startswith("Filesystem") or "Mounted on" not in header:
        raise unexpected(lines, "the df -P header (Filesystem ... Mounted on)")
    systems = []
    for number, line in rows[1:]:
        cells = line.split(None, 5)
        if len(cells) != 6 or not all(cell.isdigit() for cell in cells[1:4]) or not cells[4].endswith("%"):
            raise ParseError(f"expected a df -P row (6 columns, sizes in bytes), got {line.strip()[:80]!r}", number)
        size, used, available = (int(cell) for cell in cells[1:4])
        use = cells[4].rstrip("%")
        systems.append(FileSystem(cells[0], size, used, available, int(use) if use.isdigit() else 0, cells[5]))
    return FileSystems(systems)


# --- chronyc tracking ---------------------------------------------------------------------------------------------


@dataclass
class ClockTracking(Result):
    reference_id: str
    reference_name: str
    stratum: int
    system_offset_ns: float  # positive: the clock is ahead
    leap_status: str
    fields: dict[str, str] = field(default_factory=dict)

    @property
    def synchronised(self) -> bool:
        return self.leap_status.lower() != "not synchronised" and self.stratum > 0


def parse_chrony_tracking(text: str) -> ClockTracking:
    lines = require_content(text, "chronyc tracking output")
    fields: dict[str, str] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        name, separator, value = line.partition(":")
        if not separator:
            raise ParseError(f"expected 'Name : value', got {line.strip()[:80]!r}", number)
        fields[name.strip()] = value.strip()
    for required in ("Reference ID", "Stratum", "System time", "Leap status"):
        if required not in fields:
            raise ParseError(f"expected a {required!r} line in chronyc tracking output", len(lines))
    reference = re.fullmatch(r"([0-9A-Fa-f]{8})\s*\((.*)\)", fields["Reference ID"])
    offset = re.fullmatch(r"([0-9.]+) seconds (fast|slow) of NTP time", fields["System time"])
    if reference is None or offset is None or not fields["Stratum"].isdigit():
        raise ParseError("expected chronyc's Reference ID, Stratum and System time formats", 1)
    seconds = float(offset.group(1)) * (1 if offset.group(2) == "fast" else -1)
    return ClockTracking(
        reference_id=reference.group(1),
        reference_name=reference.group(2),
        stratum=int(fields["Stratum"]),
        system_offset_ns=seconds * 1e9,
        leap_status=fields["Leap status"],
        fields=fields,
    )


# --- ipmitool mc info ---------------------------------------------------------------------------------------------


@dataclass
class BmcInfo(Result):
    firmware_revision: str
    ipmi_version: str | None
    manufacturer: str | None


def parse_ipmitool_mc_info(text: str) -> BmcInfo:
    lines = require_content(text, "ipmitool mc info output")
    fields = {}
    for line in lines:
        name, separator, value = line.partition(":")
        if separator and not line.startswith(" "):
            fields[name.strip()] = value.strip()
    if "Firmware Revision" not in fields:
        raise unexpected(lines, "ipmitool mc info (a 'Firmware Revision' line)")
    return BmcInfo(fields["Firmware Revision"], fields.get("IPMI Version"), fields.get("Manufacturer Name"))


# --- ethtool -l ---------------------------------------------------------------------------------------------------


@dataclass
class Channels(Result):
    interface: str
    maximum: dict[str, int | None]
    current: dict[str, int | None]


def parse_ethtool_channels(text: str) -> Channels:
    lines = require_content(text, "ethtool -l output")
    first = next(line for line in lines if line.strip())
    match = re.fullmatch(r"Channel parameters for (\S+):", first.strip())
    if match is None:
        raise unexpected(lines, "'Channel parameters for IF:'")
    sections: dict[str, dict[str, int | None]] = {}
    section = None
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        if not stripped or stripped == first.strip():
            continue
        if stripped in ("Pre-set maximums:", "Current hardware settings:"):
            section = sections.setdefault(stripped, {})
            continue
        name, separator, value = stripped.partition(":")
        if section is None or not separator:
            raise ParseError(f"expected 'Name: value' under a section, got {stripped[:80]!r}", number)
        value = value.strip()
        section[name.strip().lower()] = int(value) if value.isdigit() else None
    if set(sections) != {"Pre-set maximums:", "Current hardware settings:"}:
        raise ParseError("expected both 'Pre-set maximums:' and 'Current hardware settings:'", len(lines))
    return Channels(match.group(1), sections["Pre-set maximums:"], sections["Current hardware settings:"])


# --- versions -----------------------------------------------------------------------------------------------------


@dataclass
class ToolVersion(Result):
    tool: str
    version: str


def parse_nvcc_version(text: str) -> ToolVersion:
    lines = require_content(text, "nvcc --version output")
    for line in lines:
        match = re.search(r"Cuda compilation tools, release (\d+\.\d+), V([\d.]+)", line)
        if match:
            return ToolVersion("nvcc", match.group(1))
    raise unexpected(lines, "nvcc's 'Cuda compilation tools, release X.Y' line")


def parse_mpirun_version(text: str) -> ToolVersion:
    lines = require_content(text, "mpirun --version output")
    match = re.match(r"mpirun \(Open MPI\) (\S+)", lines[0].strip()) if lines else None
    if match is None:
        raise unexpected(lines, "'mpirun (Open MPI) X.Y.Z'")
    return ToolVersion("openmpi", match.group(1))


def parse_package_version(text: str) -> ToolVersion:
    """dpkg-query -W -f=${Version}: the version alone; the upstream part before '-' is what was asked for."""
    version = text.strip()
    if not version or "\n" in version or not re.fullmatch(r"[0-9][A-Za-z0-9.+:~-]*", version):
        raise ParseError(f"expected a package version, got {version[:80]!r}", 1)
    return ToolVersion("dpkg", version.split(":")[-1].split("-")[0])


@dataclass
class PythonPackages(Result):
    versions: dict[str, str | None]  # None: not installed


def parse_python_versions(text: str) -> PythonPackages:
    lines = require_content(text, "'name version' lines")
    versions: dict[str, str | None] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        cells = line.split()
        if len(cells) != 2:
            raise ParseError(f"expected 'name version' or 'name missing', got {line.strip()[:80]!r}", number)
        versions[cells[0]] = None if cells[1] == "missing" else cells[1]
    return PythonPackages(versions)
