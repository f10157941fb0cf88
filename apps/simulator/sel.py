"""A simulated BMC's System Event Log: what a fault or a power action appends, as (sensor type, sensor, event,
asserted, severity). Stored as SimChange rows `sel:<record id>` (apps/simulator/changes.py), so the log is append-only
like a real SEL: a fault cleared later leaves its record. Record 1 is the 'Log area reset/cleared' every SEL starts
with, at the node's creation (not stored). Rendered in ipmitool's and Redfish's formats by apps/simulator/bmc.py."""

from dataclasses import dataclass

SEL_PREFIX = "sel:"
POWER_KEY = "power:state"  # {"on": bool, "at": unix time}; absent: on


@dataclass(frozen=True)
class SelRecord:
    record_id: int
    at: float  # unix time
    sensor_type: str  # ipmitool's sensor type name: Memory, Critical Interrupt, Temperature, Power Unit, …
    sensor: str
    event: str
    asserted: bool
    severity: str  # Redfish's: OK, Warning, Critical


def sel_key(record_id: int) -> str:
    return f"{SEL_PREFIX}{record_id:06d}"


def log_cleared(at: float) -> SelRecord:
    return SelRecord(1, at, "Event Logging Disabled", "#0x07", "Log area reset/cleared", True, "OK")


def record_value(sensor_type: str, sensor: str, event: str, asserted: bool, severity: str, at: float) -> dict:
    return {
        "sensor_type": sensor_type,
        "sensor": sensor,
        "event": event,
        "asserted": asserted,
        "severity": severity,
        "at": at,
    }


def from_value(record_id: int, value: dict) -> SelRecord:
    return SelRecord(
        record_id,
        float(value["at"]),
        str(value["sensor_type"]),
        str(value["sensor"]),
        str(value["event"]),
        bool(value["asserted"]),
        str(value["severity"]),
    )


def _gpu(target: str) -> str:
    return f"GPU{int(target) + 1}" if str(target).isdigit() else "GPU"


# What the BMC logs when a fault strikes: the sensor events a real HGX board's BMC asserts for it. A GPU fallen off the
# bus is a PCIe bus fatal error on its slot; uncorrectable HBM ECC a memory event; a GPU past its slowdown
# temperature crosses the upper critical threshold (the Thermal resource's 87 °C). A hung OS stops petting the BMC's
# watchdog (the kernel's ipmi_watchdog, armed with no action, so the BMC only logs it): its timer expires.
FAULT_EVENTS = {
    "xid79": lambda target: [("Critical Interrupt", f"PCIe {_gpu(target)}", "Bus Fatal Error", "Critical")],
    "ecc": lambda target: [("Memory", f"{_gpu(target)} HBM", "Uncorrectable ECC", "Critical")],
    "thermal": lambda target: [("Temperature", f"{_gpu(target)} Temp", "Upper Critical going high", "Critical")],
    "node_hang": lambda target: [("Watchdog2", "IPMI Watchdog", "Timer expired, status only", "Critical")],
}


def fault_records(kind: str, target: str, at: float) -> list[dict]:
    events = FAULT_EVENTS.get(kind)
    return [record_value(*event[:3], True, event[3], at) for event in events(target)] if events else []


def power_records(action: str, *, was_on: bool, at: float) -> list[dict]:
    """The Power Unit's 'Power off/down' asserted when the chassis goes off, deasserted when it comes back."""
    off = record_value("Power Unit", "PowerUnit", "Power off/down", True, "OK", at)
    on = record_value("Power Unit", "PowerUnit", "Power off/down", False, "OK", at)
    if action == "off":
        return [off] if was_on else []
    if action == "on":
        return [] if was_on else [on]
    return [off, on] if was_on else [on]  # cycle, reset: a chassis that was off just comes on
