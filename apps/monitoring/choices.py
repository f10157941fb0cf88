from django.db import models


class BmcProtocol(models.TextChoices):
    IPMI = "ipmi", "IPMI (lanplus)"
    REDFISH = "redfish", "Redfish"


# The port each protocol listens on when a BMC's own is not given.
DEFAULT_PORTS = {BmcProtocol.IPMI: 623, BmcProtocol.REDFISH: 443}


class PollResult(models.TextChoices):
    """How one read of one BMC ended: the label of rackpilot_bmc_polls_total and the node page's badge."""

    OK = "ok", "Read"
    PARTIAL = "partial", "Read in part"  # e.g. sensors read, but the BMC has no power reading
    AUTH_FAILED = "auth_failed", "Credentials refused"
    UNREACHABLE = "unreachable", "Unreachable"
    ERROR = "error", "Error"


POLL_RESULT_COLOURS = {
    PollResult.OK: "green",
    PollResult.PARTIAL: "orange",
    PollResult.AUTH_FAILED: "red",
    PollResult.UNREACHABLE: "red",
    PollResult.ERROR: "purple",
}


class SensorKind(models.TextChoices):
    TEMPERATURE = "temperature", "Temperature"
    FAN = "fan", "Fan"
    POWER = "power", "Power"
    COOLANT = "coolant", "Coolant"  # a liquid-cooled tray's inlet: flow, supply and return, pressure drop, leaks


class ValidationOutcome(models.TextChoices):
    """A business validation run's verdict, and each of its criteria's."""

    PASS = "pass", "Pass"
    WARN = "warn", "Warn"
    FAIL = "fail", "Fail"
    COULD_NOT_RUN = "could_not_run", "Could not run"


VALIDATION_OUTCOME_COLOURS = {
    ValidationOutcome.PASS: "green",
    ValidationOutcome.WARN: "orange",
    ValidationOutcome.FAIL: "red",
    ValidationOutcome.COULD_NOT_RUN: "purple",
}


# Which kind of workload a row is about (GPU-hours, the spot policy's plan).
WORKLOAD_KINDS = [("training", "Training job"), ("service", "Inference service")]
