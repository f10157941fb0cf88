"""The policies Rackpilot ships, created by the app's migrations: the faults an on-call would quarantine for, in
shadow until an operator turns them on, a degraded link that only notifies, and a coolant leak that powers the rack's
trays off (in shadow: remediation has no approval step, so the rack's page offers the operator the power-off at once,
and an operator who wants it automatic turns the policy on), and a node that stops answering (its OS hung) power-cycled
through its BMC (in shadow too: what it would do shows before it does it).

NVLink in a rack-scale domain: a compute tray (or a GPU) that lost links slows every collective of the jobs across the
domain (the ring runs at its slowest GPU's links), so it is quarantined, in shadow like the other quarantines. A switch
tray down costs every GPU of the domain the same share of its links (1/9 on an NVL72): draining the 18 trays would
take 72 GPUs out for an 11% bandwidth loss, and replacing the switch tray is planned work on the whole rack, so it
only notifies (on), in no node: the on-call plans the swap with the rack's users. A tray whose IMEX daemon the domain
lost fails every job that shares memory over NVLink with it: it is quarantined (shadow) until its daemon is ready."""

DEFAULTS = (
    # name, kind pattern, at least this severity, action, mode
    ("XID 79: GPU fell off the bus", "xid79", "critical", "quarantine", "shadow"),
    ("Uncorrectable ECC", "ecc_uncorrectable", "major", "quarantine", "shadow"),
    ("Degraded link", "link_degraded", "minor", "notify", "on"),
    ("Coolant leak", "coolant_leak", "critical", "power_off_trays", "shadow"),
    ("Node not answering", "node_unreachable", "critical", "power_cycle", "shadow"),
    ("NVLink links degraded", "nvlink_degraded", "major", "quarantine", "shadow"),
    ("NVLink switch tray down", "nvlink_switch_tray_down", "major", "notify", "on"),
    ("IMEX peer lost", "imex_peer_lost", "major", "quarantine", "shadow"),
)


def ship_defaults(policy_model) -> None:
    """Creates the shipped policies that are missing (by name); the model may be a migration's historical one."""
    for name, pattern, severity, action, mode in DEFAULTS:
        policy_model.objects.get_or_create(
            name=name, defaults={"kind_pattern": pattern, "min_severity": severity, "action": action, "mode": mode}
        )
