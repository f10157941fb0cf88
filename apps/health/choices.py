from django.db import models

from apps.inventory.choices import HEALTH_STATE_COLOURS
from apps.inventory.choices import HealthState as NodeState  # noqa: F401 (the name the apps above use)


class ComponentType(models.TextChoices):
    NODE = "node", "Node"
    GPU = "gpu", "GPU"
    NIC = "nic", "NIC"
    CABLE = "cable", "Cable"
    SWITCH_PORT = "switch_port", "Switch port"
    SWITCH = "switch", "Switch"
    BMC = "bmc", "BMC"
    VOLUME = "volume", "Storage volume"
    COOLANT = "coolant", "Tray coolant"  # a liquid-cooled tray's coolant inlet (flow, temperatures, pressure)
    LEAK_SENSOR = "leak_sensor", "Leak sensor"
    # A rack-scale domain's NVLink switch tray: a fault on it shows on every compute tray's GPUs, and is its own.
    NVLINK_SWITCH_TRAY = "nvlink_switch_tray", "NVLink switch tray"


class Source(models.TextChoices):
    SWEEP = "sweep", "Sweep"
    ACCEPTANCE = "acceptance", "Cluster acceptance"
    BENCHMARK = "benchmark", "Benchmark"
    TRIAGE = "triage", "Triage"
    RUNBOOK = "runbook", "Runbook"
    TELEMETRY = "telemetry", "Telemetry watch"
    BMC_LOG = "bmc_log", "BMC event log"
    BMC_SENSORS = "bmc_sensors", "BMC sensors"
    KERNEL_LOG = "kernel_log", "Kernel log"
    SCHEDULER = "scheduler", "Scheduler"
    OPERATOR = "operator", "Operator"


class Severity(models.TextChoices):
    CRITICAL = "critical", "Critical"
    MAJOR = "major", "Major"
    MINOR = "minor", "Minor"
    INFO = "info", "Info"


# Worst first: what sorts the "what is wrong now" panel and picks an event's severity when a repeat is worse.
SEVERITY_RANK = {Severity.CRITICAL: 0, Severity.MAJOR: 1, Severity.MINOR: 2, Severity.INFO: 3}
# Leaks and coolant faults: the most urgent events a fleet has (the rack page says them first, apps/remediation).
COOLANT_KINDS = ("coolant_leak", "coolant_flow_low", "coolant_temperature_high", "coolant_pressure_high")
SEVERITY_COLOURS = {Severity.CRITICAL: "red", Severity.MAJOR: "orange", Severity.MINOR: "blue", Severity.INFO: "grey"}


class ClearedBy(models.TextChoices):
    VALIDATION = "validation", "A passed validation"
    OPERATOR = "operator", "An operator"


# A node's state lives in the inventory (`Node.health_state`, written from here: inventory may not import health).
NODE_STATE_COLOURS = HEALTH_STATE_COLOURS
