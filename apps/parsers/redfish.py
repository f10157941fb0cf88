"""Redfish chassis sensors (JSON from a BMC: iDRAC, iLO, OpenBMC ...): the Thermal and Power resources, and their
successors since Redfish 2020.4, ThermalSubsystem's ThermalMetrics and the chassis' EnvironmentMetrics."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .common import Result, clean, load_json, require_dict, to_float
from .errors import ParseError


@dataclass
class RedfishSensor(Result):
    name: str
    reading: float | None
    unit: str | None
    health: str | None
    state: str | None
    physical_context: str | None = None
    upper_critical: float | None = None
    upper_fatal: float | None = None
    lower_critical: float | None = None


@dataclass
class PowerSupply(Result):
    name: str
    model: str | None
    serial: str | None
    firmware: str | None
    capacity_watts: float | None
    last_output_watts: float | None
    line_input_voltage: float | None
    health: str | None
    state: str | None


@dataclass
class RedfishReport(Result):
    """Thermal (temperatures, fans) and/or Power (consumed watts, supplies, voltages) of one chassis."""

    resource: str  # Thermal | Power | ThermalMetrics | EnvironmentMetrics
    odata_id: str | None
    temperatures: list[RedfishSensor] = field(default_factory=list)
    fans: list[RedfishSensor] = field(default_factory=list)
    voltages: list[RedfishSensor] = field(default_factory=list)
    power_supplies: list[PowerSupply] = field(default_factory=list)
    consumed_watts: float | None = None
    average_consumed_watts: float | None = None
    max_consumed_watts: float | None = None
    capacity_watts: float | None = None
    power_limit_watts: float | None = None
    energy_kwh: float | None = None


def parse_redfish(text: str) -> RedfishReport:
    """A Redfish Thermal, Power, ThermalMetrics or EnvironmentMetrics resource; other resources are rejected."""
    data = require_dict(load_json(text, "a Redfish Thermal or Power resource"), "a Redfish resource")
    if "Temperatures" in data or "Fans" in data:
        return _thermal(data)
    if "PowerControl" in data or "PowerSupplies" in data:
        return _power(data)
    if "TemperatureReadingsCelsius" in data:
        return _thermal_metrics(data)
    kind = str(data.get("@odata.type") or "")
    if "EnvironmentMetrics" in kind or "PowerWatts" in data:
        return _environment_metrics(data)
    raise ParseError(f"expected a Redfish Thermal or Power resource, got {kind or 'JSON without @odata.type'}", line=1)


def _status(item: dict[str, Any]) -> tuple[str | None, str | None]:
    status = item.get("Status") or {}
    return status.get("Health"), status.get("State")


def _thermal(data: dict[str, Any]) -> RedfishReport:
    return RedfishReport(
        resource="Thermal",
        odata_id=data.get("@odata.id"),
        temperatures=[_temperature(item) for item in data.get("Temperatures") or [] if isinstance(item, dict)],
        fans=[_fan(item) for item in data.get("Fans") or [] if isinstance(item, dict)],
    )


def _temperature(item: dict[str, Any]) -> RedfishSensor:
    health, state = _status(item)
    return RedfishSensor(
        name=str(item.get("Name") or item.get("MemberId") or ""),
        reading=to_float(item.get("ReadingCelsius")),
        unit="C",
        health=health,
        state=state,
        physical_context=item.get("PhysicalContext"),
        upper_critical=to_float(item.get("UpperThresholdCritical")),
        upper_fatal=to_float(item.get("UpperThresholdFatal")),
        lower_critical=to_float(item.get("LowerThresholdCritical")),
    )


def _fan(item: dict[str, Any]) -> RedfishSensor:
    health, state = _status(item)
    return RedfishSensor(
        name=str(item.get("Name") or item.get("FanName") or item.get("MemberId") or ""),
        reading=to_float(item.get("Reading")),
        unit=item.get("ReadingUnits"),
        health=health,
        state=state,
        physical_context=item.get("PhysicalContext"),
        upper_critical=to_float(item.get("UpperThresholdCritical")),
        lower_critical=to_float(item.get("LowerThresholdCritical")),
    )


def _power(data: dict[str, Any]) -> RedfishReport:
    control = next((item for item in data.get("PowerControl") or [] if isinstance(item, dict)), {})
    metrics = control.get("PowerMetrics") or {}
    return RedfishReport(
        resource="Power",
        odata_id=data.get("@odata.id"),
        voltages=[_voltage(item) for item in data.get("Voltages") or [] if isinstance(item, dict)],
        power_supplies=[_supply(item) for item in data.get("PowerSupplies") or [] if isinstance(item, dict)],
        consumed_watts=to_float(control.get("PowerConsumedWatts")),
        average_consumed_watts=to_float(metrics.get("AverageConsumedWatts")),
        max_consumed_watts=to_float(metrics.get("MaxConsumedWatts")),
        capacity_watts=to_float(control.get("PowerCapacityWatts")),
        power_limit_watts=to_float((control.get("PowerLimit") or {}).get("LimitInWatts")),
    )


def _voltage(item: dict[str, Any]) -> RedfishSensor:
    health, state = _status(item)
    return RedfishSensor(
        name=str(item.get("Name") or item.get("MemberId") or ""),
        reading=to_float(item.get("ReadingVolts")),
        unit="V",
        health=health,
        state=state,
        physical_context=item.get("PhysicalContext"),
        upper_critical=to_float(item.get("UpperThresholdCritical")),
        lower_critical=to_float(item.get("LowerThresholdCritical")),
    )


def _supply(item: dict[str, Any]) -> PowerSupply:
    health, state = _status(item)
    return PowerSupply(
        name=str(item.get("Name") or item.get("MemberId") or ""),
        model=clean(item.get("Model")),
        serial=clean(item.get("SerialNumber")),
        firmware=clean(item.get("FirmwareVersion")),
        capacity_watts=to_float(item.get("PowerCapacityWatts")),
        last_output_watts=to_float(item.get("LastPowerOutputWatts")),
        line_input_voltage=to_float(item.get("LineInputVoltage")),
        health=health,
        state=state,
    )


def _excerpt(item: Any) -> dict[str, Any]:
    """A SensorExcerpt ({"Reading": 24.5, "DataSourceUri": ...}); {} when absent or not an object."""
    return item if isinstance(item, dict) else {}


def _thermal_metrics(data: dict[str, Any]) -> RedfishReport:
    temperatures = [
        RedfishSensor(
            name=str(item.get("DeviceName") or item.get("DataSourceUri") or ""),
            reading=to_float(item.get("Reading")),
            unit="C",
            health=None,
            state=None,
            physical_context=item.get("PhysicalContext"),
        )
        for item in data.get("TemperatureReadingsCelsius") or []
        if isinstance(item, dict)
    ]
    return RedfishReport(resource="ThermalMetrics", odata_id=data.get("@odata.id"), temperatures=temperatures)


def _environment_metrics(data: dict[str, Any]) -> RedfishReport:
    temperature = _excerpt(data.get("TemperatureCelsius"))
    fans = [
        RedfishSensor(
            name=str(item.get("DeviceName") or item.get("DataSourceUri") or ""),
            reading=to_float(item.get("SpeedRPM") if item.get("SpeedRPM") is not None else item.get("Reading")),
            unit="RPM" if item.get("SpeedRPM") is not None else "Percent",
            health=None,
            state=None,
            physical_context=item.get("PhysicalContext"),
        )
        for item in data.get("FanSpeedsPercent") or []
        if isinstance(item, dict)
    ]
    temperatures = []
    if to_float(temperature.get("Reading")) is not None:
        temperatures.append(
            RedfishSensor(
                name=str(data.get("Name") or "Temperature"),
                reading=to_float(temperature.get("Reading")),
                unit="C",
                health=None,
                state=None,
                physical_context=data.get("PhysicalContext"),
            )
        )
    limit = _excerpt(data.get("PowerLimitWatts"))
    return RedfishReport(
        resource="EnvironmentMetrics",
        odata_id=data.get("@odata.id"),
        temperatures=temperatures,
        fans=fans,
        consumed_watts=to_float(_excerpt(data.get("PowerWatts")).get("Reading")),
        power_limit_watts=to_float(
            limit.get("SetPoint") if limit.get("SetPoint") is not None else limit.get("Reading")
        ),
        energy_kwh=to_float(_excerpt(data.get("EnergykWh")).get("Reading")),
    )


# --- liquid cooling (Redfish 2023.2: ThermalSubsystem's CoolantConnectors and LeakDetection) ----------------------


@dataclass
class CoolantConnector(Result):
    """A coolant connector of a liquid-cooled chassis (a tray's inlet): flow, supply and return temperatures, and
    the pressure drop."""

    name: str
    flow_lpm: float | None
    supply_c: float | None
    return_c: float | None
    delta_pressure_kpa: float | None
    health: str | None


@dataclass
class LeakDetector(Result):
    """A leak detector: `DetectorState` OK, Warning or Critical (a leak)."""

    name: str
    state: str | None
    health: str | None

    @property
    def leaking(self) -> bool:
        return self.state in ("Warning", "Critical")


def _name(data: dict[str, Any], fallback: str) -> str:
    name = data.get("Name") if isinstance(data.get("Name"), str) else None
    return clean(name) or str(data.get("Id") or fallback)


def _reading(data: dict[str, Any], key: str) -> float | None:
    return to_float(_excerpt(data.get(key)).get("Reading"))


def parse_coolant_connector(text: str) -> CoolantConnector:
    data = require_dict(load_json(text, "a Redfish CoolantConnector"), "a Redfish CoolantConnector")
    if "CoolantConnector" not in str(data.get("@odata.type") or "") and "FlowLitersPerMinute" not in data:
        raise ParseError("expected a Redfish CoolantConnector (FlowLitersPerMinute)", line=1)
    return CoolantConnector(
        name=_name(data, "coolant connector"),
        flow_lpm=_reading(data, "FlowLitersPerMinute"),
        supply_c=_reading(data, "SupplyTemperatureCelsius"),
        return_c=_reading(data, "ReturnTemperatureCelsius"),
        delta_pressure_kpa=_reading(data, "DeltaPressurekPa"),
        health=_status(data)[0],
    )


def parse_leak_detector(text: str) -> LeakDetector:
    data = require_dict(load_json(text, "a Redfish LeakDetector"), "a Redfish LeakDetector")
    if "LeakDetector" not in str(data.get("@odata.type") or "") and "DetectorState" not in data:
        raise ParseError("expected a Redfish LeakDetector (DetectorState)", line=1)
    state = data.get("DetectorState")
    return LeakDetector(
        name=_name(data, "leak detector"),
        state=state if isinstance(state, str) else None,
        health=_status(data)[0],
    )


# --- log entries: a LogService's Entries collection (the SEL as Redfish serves it) ----------------------------------


@dataclass
class RedfishLogEntry(Result):
    """One LogEntry (DMTF LogEntry schema): a SEL record carries SensorType and EntryCode (Assert / Deassert)."""

    id: str
    created: str | None  # ISO 8601 with its offset, as the BMC gave it
    severity: str | None  # OK, Warning, Critical
    message: str
    sensor_type: str | None
    entry_code: str | None
    message_id: str | None
    entry_type: str | None  # SEL, Event, Oem


@dataclass
class RedfishLog(Result):
    entries: list[RedfishLogEntry]
    next_link: str | None = None  # Members@odata.nextLink: the collection goes on


def parse_log_entries(text: str) -> RedfishLog:
    """A LogEntryCollection (`…/LogServices/<id>/Entries`)."""
    data = require_dict(load_json(text, "a Redfish LogEntry collection"), "a Redfish LogEntry collection")
    members = data.get("Members")
    if not isinstance(members, list):
        raise ParseError("expected a Redfish LogEntry collection (Members)", line=1)
    entries = [
        RedfishLogEntry(
            id=str(item.get("Id") or item.get("@odata.id") or ""),
            created=clean(item.get("Created")),
            severity=clean(item.get("Severity")),
            message=str(item.get("Message") or ""),
            sensor_type=clean(item.get("SensorType")),
            entry_code=clean(item.get("EntryCode")),
            message_id=clean(item.get("MessageId")),
            entry_type=clean(item.get("EntryType")),
        )
        for item in members
        if isinstance(item, dict)
    ]
    return RedfishLog(entries=entries, next_link=clean(data.get("Members@odata.nextLink")))
