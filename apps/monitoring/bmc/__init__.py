"""Reading the nodes' BMCs: clients.py reads one BMC (IPMI or Redfish, the simulated ones too), logins.py holds what
a BMC's settings may be, polling.py the per-site schedule and the readings' pruning. The `bmc-poll` kind is in
apps/monitoring/kinds.py."""

from apps.monitoring.bmc.clients import Reading, chassis_power

__all__ = ["Reading", "chassis_power"]  # what the node page's panels (apps/monitoring/panels.py) read of a poll
