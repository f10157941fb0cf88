"""Reading the nodes' BMCs. logins.py: a BMC's settings (what they may hold, saving them, the login a poll uses);
clients.py: reading one BMC over IPMI or Redfish (the simulated ones too); readings.py: what a poll gives and
storing it as series; polling.py: the per-site schedule that starts `bmc-poll` jobs (the kind:
apps/monitoring/kinds/bmc_poll.py)."""
