"""ipmitool sensor listings: `sdr` (3 columns), `sdr elist` (5 columns) and `sensor` (10 columns)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .common import Result, clean, require_content, shorten, to_float, unexpected
from .errors import ParseError

UNITS = {
    "degrees c": "C",
    "degrees f": "F",
    "watts": "W",
    "volts": "V",
    "amps": "A",
    "rpm": "RPM",
    "percent": "%",
    "feet": "ft",
}
READING = re.compile(r"^([-+]?\d+(?:\.\d+)?)\s+(.+)$")
THRESHOLD_NAMES = (
    "lower_non_recoverable",
    "lower_critical",
    "lower_non_critical",
    "upper_non_critical",
    "upper_critical",
    "upper_non_recoverable",
)
FORMATS = {3: "sdr", 5: "sdr_elist", 10: "sensor"}


@dataclass
class Sensor(Result):
    name: str
    value: float | None  # None for discrete sensors, 'no reading', 'Disabled'
    unit: str | None
    status: str | None  # ok, ns (no sensor), nc, cr, nr, or a discrete state code
    reading: str | None  # the reading as printed
    sensor_id: str | None = None
    entity: str | None = None
    thresholds: dict[str, float | None] = field(default_factory=dict)


@dataclass
class SensorReadings(Result):
    format: str
    sensors: list[Sensor]

    def by_unit(self, unit: str) -> list[Sensor]:
        return [sensor for sensor in self.sensors if sensor.unit == unit]


def normalise_unit(unit: str | None) -> str | None:
    unit = clean(unit)
    if unit is None or unit.lower() == "discrete":
        return None
    return UNITS.get(unit.lower(), unit)


def parse_ipmitool(text: str) -> SensorReadings:
    """ipmitool sdr / sdr elist [all] / sensor; the layout is told apart by the number of '|' columns."""
    lines = require_content(text, "ipmitool sdr or sensor output")
    rows = [
        (number, [cell.strip() for cell in line.split("|")]) for number, line in enumerate(lines, 1) if line.strip()
    ]
    width = len(rows[0][1])
    if width not in FORMATS:
        raise unexpected(lines, "ipmitool 'name | reading | status' rows (3, 5 or 10 columns)")
    sensors = []
    for number, cells in rows:
        if len(cells) != width:
            raise ParseError(
                f"expected {width} '|'-separated columns, got {len(cells)}: {shorten(lines[number - 1])}", number
            )
        sensors.append(_SENSOR_READERS[FORMATS[width]](cells))
    return SensorReadings(format=FORMATS[width], sensors=sensors)


def _from_sdr(cells: list[str]) -> Sensor:
    value, unit = _reading(cells[1])
    return Sensor(name=cells[0], value=value, unit=unit, status=clean(cells[2]), reading=clean(cells[1]))


def _from_elist(cells: list[str]) -> Sensor:
    value, unit = _reading(cells[4])
    return Sensor(
        name=cells[0],
        value=value,
        unit=unit,
        status=clean(cells[2]),
        reading=cells[4] or None,
        sensor_id=cells[1],
        entity=cells[3],
    )


def _from_sensor(cells: list[str]) -> Sensor:
    unit = normalise_unit(cells[2])
    return Sensor(
        name=cells[0],
        value=to_float(cells[1]) if unit is not None else None,
        unit=unit,
        status=clean(cells[3]),
        reading=clean(cells[1]),
        thresholds=dict(zip(THRESHOLD_NAMES, (to_float(cell) for cell in cells[4:10]), strict=True)),
    )


def _reading(text: str) -> tuple[float | None, str | None]:
    """'19 degrees C' → (19.0, 'C'); discrete ('0x00', 'State Deasserted', 'Disabled') → (None, None)."""
    match = READING.match(text.strip())
    if not match:
        return None, None
    return float(match[1]), normalise_unit(match[2])


_SENSOR_READERS = {"sdr": _from_sdr, "sdr_elist": _from_elist, "sensor": _from_sensor}


# --- DCMI power reading -------------------------------------------------------------------------------------------

# ipmitool prints 'Instantaneous power reading:   197 Watts'; FreeIPMI's ipmi-dcmi 'Current Power : 1190 Watts'.
DCMI_FIELDS = {
    "instantaneous power reading": "current_watts",
    "current power": "current_watts",
    "minimum during sampling period": "minimum_watts",
    "minimum power over sampling duration": "minimum_watts",
    "maximum during sampling period": "maximum_watts",
    "maximum power over sampling duration": "maximum_watts",
    "average power reading over sample period": "average_watts",
    "average power over sampling duration": "average_watts",
}
DCMI_LINE = re.compile(r"^\s*([^:]+?)\s*:\s*(.*?)\s*$")
DCMI_STATE = {"power reading state is": "ipmitool", "power measurement": "freeipmi"}


@dataclass
class DcmiPowerReading(Result):
    """`ipmitool dcmi power reading` or FreeIPMI `ipmi-dcmi --get-system-power-statistics`."""

    current_watts: float | None
    minimum_watts: float | None
    maximum_watts: float | None
    average_watts: float | None
    active: bool  # 'activated' / 'Active': a BMC with power readings off prints zeros, which are no reading
    sampling_seconds: float | None = None


def parse_dcmi_power(text: str) -> DcmiPowerReading:
    lines = require_content(text, "a DCMI power reading")
    values: dict[str, float | None] = {}
    active: bool | None = None
    sampling = None
    for line in lines:
        match = DCMI_LINE.match(line)
        if not match:
            continue
        key, value = match[1].lower(), match[2]
        if key in DCMI_FIELDS:
            values[DCMI_FIELDS[key]] = to_float(value.split()[0]) if value else None
        elif key in DCMI_STATE:
            active = value.lower() in ("activated", "active")
        elif key == "sampling period":  # '00123893 Seconds.'
            sampling = to_float(value.split()[0])
        elif key == "statistics reporting time period":  # '688000 milliseconds'
            milliseconds = to_float(value.split()[0])
            sampling = milliseconds / 1000 if milliseconds is not None else None
    if "current_watts" not in values or active is None:
        raise unexpected(lines, "a DCMI power reading ('Instantaneous power reading:' and its state)")
    return DcmiPowerReading(
        current_watts=values.get("current_watts"),
        minimum_watts=values.get("minimum_watts"),
        maximum_watts=values.get("maximum_watts"),
        average_watts=values.get("average_watts"),
        active=active,
        sampling_seconds=sampling,
    )


# --- the System Event Log: `ipmitool sel elist` / `sel list` -----------------------------------------------------

# ipmitool's sensor type names (ipmitool's sensor_type_desc), longest first so "Power Supply" wins over "Power".
SEL_SENSOR_TYPES = sorted(
    (
        "Temperature", "Voltage", "Current", "Fan", "Physical Security", "Platform Security", "Processor",
        "Power Supply", "Power Unit", "Cooling Device", "Other", "Memory", "Drive Slot / Bay", "Drive Slot",
        "POST Memory Resize", "System Firmwares", "System Firmware Progress", "Event Logging Disabled", "Watchdog1",
        "Watchdog2", "Watchdog", "System Event", "Critical Interrupt", "Button", "Module / Board", "Microcontroller",
        "Add-in Card", "Chassis", "Chip Set", "Other FRU", "Cable / Interconnect", "Terminator",
        "System Boot Initiated", "Boot Error", "OS Boot", "OS Critical Stop", "Slot / Connector",
        "System ACPI Power State", "Platform Alert", "Entity Presence", "Monitor ASIC", "LAN",
        "Management Subsystem Health", "Battery", "Session Audit", "Version Change", "FRU State",
    ),
    key=len,
    reverse=True,
)  # fmt: skip
SEL_ID = re.compile(r"^[0-9a-fA-F]{1,4}$")
SEL_DATE = re.compile(r"^(\d\d)/(\d\d)/(\d{4})$")
SEL_TIME = re.compile(r"^(\d\d):(\d\d):(\d\d)(?:\s+\S+)?$")


@dataclass
class SelEntry(Result):
    """One SEL record as ipmitool prints it: `  3d | 10/02/2025 | 17:33:30 | Memory DIMM A3 | Uncorrectable ECC |
    Asserted`. The record id is hexadecimal; the time is the BMC's clock, which carries no zone."""

    record_id: int
    timestamp: str | None  # 2025-10-02T17:33:30, None for 'Pre-Init' records (before the BMC's clock was set)
    sensor_type: str  # Memory, Power Supply, … ('' when the sensor column names no known type)
    sensor: str  # the rest of the sensor column: 'DIMM A3', '#0x08', ''
    event: str  # Uncorrectable ECC, Failure detected, …
    direction: str | None  # Asserted / Deasserted
    detail: str | None  # the optional seventh column: 'Reading 28 > Threshold 28 degrees C'
    line: str  # the line as printed, for evidence
    line_number: int


@dataclass
class SelLog(Result):
    entries: list[SelEntry]


def parse_sel_elist(text: str) -> SelLog:
    """`ipmitool sel elist` or `sel list` (the same columns; elist names the sensors). An empty SEL prints
    'SEL has no entries'."""
    lines = require_content(text, "ipmitool sel elist output")
    entries = []
    for number, line in enumerate(lines, 1):
        if not line.strip() or line.strip() == "SEL has no entries":
            continue
        cells = [cell.strip() for cell in line.split("|")]
        if len(cells) < 6 or not SEL_ID.match(cells[0]):
            raise ParseError(
                f"expected 'id | date | time | sensor | event | direction' columns: {shorten(line)}", number
            )
        sensor_type, sensor = _sel_sensor(cells[3])
        entries.append(
            SelEntry(
                record_id=int(cells[0], 16),
                timestamp=_sel_timestamp(cells[1], cells[2]),
                sensor_type=sensor_type,
                sensor=sensor,
                event=cells[4],
                direction=clean(cells[5]),
                detail=clean(" | ".join(cells[6:])) if len(cells) > 6 else None,
                line=line.rstrip(),
                line_number=number,
            )
        )
    return SelLog(entries=entries)


def _sel_sensor(column: str) -> tuple[str, str]:
    for name in SEL_SENSOR_TYPES:
        if column == name or column.startswith(name + " "):
            return name, column[len(name) :].strip()
    return "", column


def _sel_timestamp(date: str, time: str) -> str | None:
    day, clock = SEL_DATE.match(date), SEL_TIME.match(time)
    if not day or not clock:
        return None
    return f"{day[3]}-{day[1]}-{day[2]}T{clock[1]}:{clock[2]}:{clock[3]}"


# --- chassis power status -----------------------------------------------------------------------------------------

CHASSIS_POWER = re.compile(r"^Chassis Power is (on|off)\s*$", re.IGNORECASE)


def parse_chassis_power(text: str) -> str:
    """`ipmitool chassis power status` → 'on' or 'off'."""
    lines = require_content(text, "ipmitool chassis power status output")
    for line in lines:
        match = CHASSIS_POWER.match(line.strip())
        if match:
            return match[1].lower()
    raise unexpected(lines, "'Chassis Power is on' or 'Chassis Power is off'")
