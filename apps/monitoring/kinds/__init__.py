"""The monitoring app's job kinds: `bmc-poll` (reads the nodes' BMCs, bmc_poll.py), `business-validation` (a
serving load test judged against the business criteria, business_validation.py), `kernel-log` (the nodes' Xid and
PCIe AER lines as health events, kernel_log.py) and `training-progress` (a training job's step lines from its log,
training_progress.py). Importing this package registers them (MonitoringConfig.ready)."""

from apps.monitoring.kinds import (  # noqa: F401
    bmc_poll,
    bmc_power,
    bmc_sel,
    business_validation,
    kernel_log,
    training_progress,
)
