"""The out-of-band power actions through a node's BMC, named once below the apps that use them: monitoring runs
them (the `bmc-power` kind, apps/monitoring/kinds/bmc_power.py), remediation starts them by name (it may not import
monitoring), the simulated BMCs obey them (apps/nodeexec/sim.py's hook)."""

POWER_KIND = "bmc-power"
SEL_KIND = "bmc-sel"
POWER_ACTIONS = ("status", "on", "off", "cycle", "reset")
# What takes a running node down: audited with who asked, and counted by remediation's circuit breaker.
DESTRUCTIVE_ACTIONS = ("off", "cycle", "reset")
# The chassis power an action leaves behind, as `chassis power status` / Redfish PowerState read it back.
POWER_AFTER = {"on": "on", "off": "off", "cycle": "on", "reset": "on"}
