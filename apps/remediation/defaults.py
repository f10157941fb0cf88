"""The policies Rackpilot ships, created by the app's first migration: the faults an on-call would quarantine for,
in shadow until an operator turns them on, and a degraded link that only notifies."""

DEFAULTS = (
    # name, kind pattern, at least this severity, action, mode
    ("XID 79: GPU fell off the bus", "xid79", "critical", "quarantine", "shadow"),
    ("Uncorrectable ECC", "ecc_uncorrectable", "major", "quarantine", "shadow"),
    ("Degraded link", "link_degraded", "minor", "notify", "on"),
)


def ship_defaults(policy_model) -> None:
    """Creates the shipped policies that are missing (by name); the model may be a migration's historical one."""
    for name, pattern, severity, action, mode in DEFAULTS:
        policy_model.objects.get_or_create(
            name=name, defaults={"kind_pattern": pattern, "min_severity": severity, "action": action, "mode": mode}
        )
