"""When a schedule's ticks fall: crontab fields (celery's crontab, in the install's time zone) or every N minutes
from the schedule's creation. Pure functions of the schedule's fields and a time."""

import datetime as dt
import math
from collections.abc import Iterator
from zoneinfo import ZoneInfo

from celery.schedules import crontab
from django.conf import settings

from apps.automation.choices import Timing

CRONTAB_FIELDS = ("minute", "hour", "day_of_month", "month_of_year", "day_of_week")
SEARCH_DAYS = 400  # far enough for any crontab that ever fires (29 February needs four years: refused as too rare)


def crontab_errors(**fields: str) -> dict[str, list[str]]:
    """Every one of these crontab fields that celery refuses, by name, with why (empty when all hold); given all of
    them, also days that never occur (on day_of_month)."""
    errors = {}
    for name, value in fields.items():
        try:
            crontab(**{name: value})
        except (ValueError, TypeError) as error:
            errors[name] = [f"Not a crontab {name.replace('_', ' ')} field: {error}"]
    if not errors and set(fields) == set(CRONTAB_FIELDS):
        try:
            crontab(**fields)
        except (ValueError, TypeError) as error:  # fields that hold alone but never meet (31 February)
            errors["day_of_month"] = [str(error)]
    return errors


def parse_crontab(**fields: str) -> crontab:
    """celery's crontab of these fields; ValueError naming every field that is wrong."""
    fields = {name: fields.get(name, "*") for name in CRONTAB_FIELDS}
    if errors := crontab_errors(**fields):
        raise ValueError(errors)
    return crontab(**fields)


def _zone() -> ZoneInfo:
    return ZoneInfo(settings.TIME_ZONE)


def crontab_times(cron: crontab, start: dt.datetime, *, forward: bool) -> Iterator[dt.datetime]:
    """The crontab's times from `start` on (forward) or back from it, as aware datetimes; at most SEARCH_DAYS."""
    zone = _zone()
    local = start.astimezone(zone)
    minutes, hours = sorted(cron.minute, reverse=not forward), sorted(cron.hour, reverse=not forward)
    for offset in range(SEARCH_DAYS):
        day = local.date() + dt.timedelta(days=offset if forward else -offset)
        celery_dow = (day.weekday() + 1) % 7  # celery counts from Sunday = 0
        if day.month not in cron.month_of_year or day.day not in cron.day_of_month:
            continue
        if celery_dow not in cron.day_of_week:
            continue
        for hour in hours:
            for minute in minutes:
                moment = dt.datetime(day.year, day.month, day.day, hour, minute, tzinfo=zone)
                if (moment >= start) if forward else (moment <= start):
                    yield moment


def schedule_crontab(schedule) -> crontab:
    return parse_crontab(**{name: getattr(schedule, name) for name in CRONTAB_FIELDS})


def tick_for(schedule, now: dt.datetime) -> dt.datetime:
    """The tick a send at `now` is for. Crontab: its latest time at or before now (+30 s, for a beat a little early);
    interval: the multiple of the interval from the schedule's creation nearest to now. Two beats sending for the
    same tick, seconds apart, name the same tick."""
    if schedule.timing == Timing.INTERVAL:
        every = dt.timedelta(minutes=schedule.every_minutes or 1)
        steps = round((now - schedule.created) / every)
        return schedule.created + max(0, steps) * every
    for moment in crontab_times(schedule_crontab(schedule), now + dt.timedelta(seconds=30), forward=False):
        return moment
    return now.replace(second=0, microsecond=0)


def latest_due(schedule, now: dt.datetime) -> dt.datetime | None:
    """The latest tick at or before now (None: none since the schedule was made)."""
    if schedule.timing == Timing.INTERVAL:
        every = dt.timedelta(minutes=schedule.every_minutes or 1)
        steps = math.floor((now - schedule.created) / every)
        return schedule.created + steps * every if steps >= 1 else None
    for moment in crontab_times(schedule_crontab(schedule), now, forward=False):
        return moment if moment > schedule.created else None
    return None


def next_run(schedule, now: dt.datetime) -> dt.datetime | None:
    if schedule.timing == Timing.INTERVAL:
        every = dt.timedelta(minutes=schedule.every_minutes or 1)
        steps = math.floor((now - schedule.created) / every) + 1
        return schedule.created + max(1, steps) * every
    for moment in crontab_times(schedule_crontab(schedule), now + dt.timedelta(seconds=1), forward=True):
        return moment
    return None


def guard(schedule) -> dt.timedelta:
    """How close after a claimed tick another is refused: half an interval (two beats out of phase), 0 for crontab."""
    if schedule.timing == Timing.INTERVAL:
        return dt.timedelta(minutes=(schedule.every_minutes or 1) / 2)
    return dt.timedelta(0)
