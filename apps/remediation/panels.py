"""The rack page's first section (apps/inventory/sections.py RACK_PAGE): the rack's open leak and coolant events, the
most urgent the fleet has, with what the coolant policy did or would do about them and, for operators, the trays'
power-off at one click (those not off already); and the rack's nodes their BMCs read off (its trays, an air-cooled
server), with their power-on."""

from apps.accounts.choices import Role
from apps.health.choices import COOLANT_KINDS, Severity
from apps.remediation import services
from apps.remediation.choices import Action
from apps.remediation.models import RemediationDecision


def rack_coolant(rack, request) -> dict:
    events = list(
        services.rack_leaks(rack)
        .filter(kind__in=COOLANT_KINDS)
        .select_related("node", "nvlink_switch_tray")
        .worst_first()
    )
    leaks = [event for event in events if event.kind == "coolant_leak"]
    decisions = list(
        RemediationDecision.objects.filter(event__in=leaks, action=Action.POWER_OFF_TRAYS)
        .select_related("policy")
        .order_by("-decided_at", "-id")
    )
    origin = services.leak_origin(leaks[0]) if leaks else None
    trays = services.trays_on(origin) if origin else []  # what a power-off would act on
    off = list(services.nodes_off(rack))
    operator = request.user.has_role(Role.OPERATOR)
    return {
        "rack": rack,
        "events": events,
        "critical": any(event.severity == Severity.CRITICAL for event in events),
        "decisions": decisions,
        "leaks": leaks,
        "trays": trays,
        "off": off,
        "off_noun": "tray" if all(node.nvlink_domain_id for node in off) else "node",  # a rack-scale rack's are trays
        "may_power_off": bool(trays) and operator,
        "may_power_on": bool(off) and operator,
        "may_clear": operator,  # once the leak is found and fixed (the sensors read dry again)
    }
