"""The incident page live: what the runbook records is pushed to the incident's Channels group as it is committed.

The database is the truth. A frame only tells the page that something changed and what (a piece of evidence, the
ranking, the incident's or a fix's state); the page then fetches its live part again, so it always shows the stored
rows. A lost push costs nothing but speed: the page refreshes whenever its socket (re)connects, and polls while it
has none (apps/diagnosis/consumers.py, static/js/incidents.js).
"""

from django.db import transaction
from django.db.models.signals import post_save

from apps.diagnosis.models import Incident, Remediation
from apps.jobs.events import Broadcaster

MESSAGE_TYPE = "incident.update"  # handled by IncidentConsumer.incident_update


def incident_group(public_id) -> str:
    return f"incident.{public_id}"


def push(incident: Incident, frame: dict) -> None:
    """Send `frame` to the incident's watchers once the current transaction commits (at once outside one)."""
    group = incident_group(incident.public_id)
    message = {"type": MESSAGE_TYPE, "frame": {"incident": str(incident.public_id), **frame}}
    transaction.on_commit(lambda: _send(group, message))


def _send(group: str, message: dict) -> None:
    broadcaster = Broadcaster()  # sends on the ASGI server's loop with the in-memory layer; never raises
    try:
        broadcaster.send([(group, message)])
    finally:
        broadcaster.close()


def _incident_saved(sender, instance: Incident, raw=False, **kwargs) -> None:
    if not raw:
        push(instance, {"type": "state", "state": instance.state, "cause": instance.cause})


def _remediation_saved(sender, instance: Remediation, raw=False, **kwargs) -> None:
    if not raw:
        push(
            instance.incident, {"type": "remediation", "remediation": str(instance.public_id), "state": instance.state}
        )


def connect() -> None:
    """Every save of an incident or a fix, whoever makes it (a runbook phase, an approval, a recovery), is pushed."""
    post_save.connect(_incident_saved, sender=Incident, dispatch_uid="diagnosis-live-incident")
    post_save.connect(_remediation_saved, sender=Remediation, dispatch_uid="diagnosis-live-remediation")
