"""What a BMC poll gives: its readings (temperatures, fans, power) and its outcome; storing them as series
(`BmcReading` rows, each BMC's last result) and pruning old ones."""

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from apps.inventory.choices import PowerState
from apps.inventory.models import Node
from apps.monitoring.choices import PollResult, SensorKind
from apps.monitoring.models import Bmc, BmcReading


@dataclass(frozen=True)
class Reading:
    kind: str
    sensor: str
    unit: str
    value: float


@dataclass(frozen=True)
class Coolant:
    """A liquid-cooled tray's coolant inlet (the first connector its BMC lists) and its leak detectors."""

    flow_lpm: float | None
    supply_c: float | None
    return_c: float | None
    delta_pressure_kpa: float | None
    detectors: int
    leaking: tuple[str, ...]  # the detectors that say a leak, by name


def coolant_of(connectors: list, detectors: list) -> Coolant | None:
    """The coolant figures of parsed CoolantConnectors and LeakDetectors (apps/parsers/redfish.py); None for an
    air-cooled chassis (neither)."""
    if not connectors and not detectors:
        return None
    inlet = connectors[0] if connectors else None
    return Coolant(
        flow_lpm=inlet.flow_lpm if inlet else None,
        supply_c=inlet.supply_c if inlet else None,
        return_c=inlet.return_c if inlet else None,
        delta_pressure_kpa=inlet.delta_pressure_kpa if inlet else None,
        detectors=len(detectors),
        leaking=tuple(detector.name for detector in detectors if detector.leaking),
    )


@dataclass
class PollOutcome:
    result: str
    message: str
    readings: list[Reading] = field(default_factory=list)
    transcript: str = ""
    coolant: Coolant | None = None  # a liquid-cooled tray's; judged by apps/monitoring/bmc/coolant.py
    power_state: str = ""  # the chassis power the BMC reads (on, off); blank where it says none

    def summary(self) -> str:
        """One line for the job's matrix cell: the hottest temperature, the power and the fastest fan."""
        if self.result in (PollResult.AUTH_FAILED, PollResult.UNREACHABLE, PollResult.ERROR):
            return self.message
        parts = []
        by_kind = {kind: [r for r in self.readings if r.kind == kind] for kind in SensorKind.values}
        if by_kind[SensorKind.TEMPERATURE]:
            parts.append(f"max {max(r.value for r in by_kind[SensorKind.TEMPERATURE]):g} °C")
        power = chassis_power(self.readings)
        if power is not None:
            parts.append(f"{power:g} W")
        rpm = [r.value for r in by_kind[SensorKind.FAN] if r.unit == "RPM"]
        if rpm:
            parts.append(f"fans up to {max(rpm):g} RPM")
        text = f"{len(self.readings)} readings: " + ", ".join(parts) if parts else "no readings"
        return f"{text}; {self.message}" if self.message else text


def chassis_power(readings: list[Reading]) -> float | None:
    """The node's power draw: the BMC's whole-chassis sensor when it has one, else the sum of its supplies."""
    power = [r for r in readings if r.kind == SensorKind.POWER]
    whole = [r.value for r in power if not r.sensor.upper().startswith("PSU")]
    if whole:
        return max(whole)
    return sum(r.value for r in power) if power else None


# The coolant sensors kept as series (kind coolant): what the rack page shows of its loop beside the loop's limits.
COOLANT_FLOW, COOLANT_SUPPLY, COOLANT_RETURN = "Coolant flow", "Coolant supply", "Coolant return"
COOLANT_PRESSURE, LEAKS = "Coolant pressure drop", "Leak detectors leaking"


def coolant_readings(coolant: Coolant | None) -> list[Reading]:
    """A tray's coolant figures as readings; the leak detectors as how many of them say a leak (0: dry)."""
    if coolant is None:
        return []
    figures = (
        (COOLANT_FLOW, "l/min", coolant.flow_lpm),
        (COOLANT_SUPPLY, "C", coolant.supply_c),
        (COOLANT_RETURN, "C", coolant.return_c),
        (COOLANT_PRESSURE, "kPa", coolant.delta_pressure_kpa),
        (LEAKS, "", len(coolant.leaking) if coolant.detectors else None),
    )
    return [Reading(SensorKind.COOLANT, sensor, unit, value) for sensor, unit, value in figures if value is not None]


def polled_at(moment: datetime) -> datetime:
    """Every reading of a poll shares one time (the node page shows 'the latest poll' by it): whole seconds."""
    return moment.replace(microsecond=0)


COUNTER_OF = {PollResult.OK: "polls_ok", PollResult.PARTIAL: "polls_partial"}
READ = (PollResult.OK, PollResult.PARTIAL)


def record_power_states(states: dict[int, str], *, at: datetime) -> None:
    """Write each node's chassis power as its BMC read it (node id -> on / off; blank: not read, left as it was)
    where it changed, with since when: the inventory's `Node.power_state`, which the rack page, the health producers
    and remediation read."""
    for state in (PowerState.ON, PowerState.OFF):
        changed = [node_id for node_id, read in states.items() if read == state]
        Node.objects.filter(pk__in=changed).exclude(power_state=state).update(power_state=state, power_state_since=at)


def record_polls(outcomes: dict[int, PollOutcome], *, at: datetime, owner: str = "node") -> int:
    """Store the readings of a shard's polls and each BMC's last result; returns how many readings were written.
    `outcomes` are by node id, or by NVLink switch tray id where `owner` is "switch_tray" (a switch tray has no
    chassis power state to record).

    A refused or failed poll writes no readings: only its BMC's last result, message and failure count change.
    Updates go through the queryset (no per-poll audit entries: a poll is not an operator's change).
    """
    read = {owner_id: outcome for owner_id, outcome in outcomes.items() if outcome.result in READ}
    rows = [
        BmcReading(**{f"{owner}_id": owner_id}, time=at, kind=r.kind, sensor=r.sensor[:64], unit=r.unit, value=r.value)
        for owner_id, outcome in read.items()
        for r in [*outcome.readings, *coolant_readings(outcome.coolant)]
    ]
    with transaction.atomic():
        BmcReading.objects.bulk_create(rows, batch_size=2000)
        if owner == "node":
            record_power_states({node_id: outcome.power_state for node_id, outcome in read.items()}, at=at)
        for owner_id, outcome in outcomes.items():
            counter = COUNTER_OF.get(outcome.result, "polls_failed")
            Bmc.objects.filter(**{f"{owner}_id": owner_id}).update(
                last_polled=at,
                last_result=outcome.result,
                last_message=outcome.message[:300],
                **{counter: F(counter) + 1},
            )
    return len(rows)


def prune_readings(*, now: datetime | None = None) -> int:
    """Delete readings older than RACKPILOT_BMC_RETENTION_DAYS; returns how many went."""
    cutoff = (now or timezone.now()) - timedelta(days=settings.RACKPILOT_BMC_RETENTION_DAYS)
    deleted, _ = BmcReading.objects.filter(time__lt=cutoff).delete()
    return deleted
