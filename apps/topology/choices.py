from django.db import models


class Verdict(models.TextChoices):
    """What a topology rule concluded. Could-not-run (nothing to check) is never shown as a pass."""

    PASS = "pass", "Pass"
    WARN = "warn", "Warning"
    FAIL = "fail", "Fail"
    COULD_NOT_RUN = "could-not-run", "Could not run"


VERDICT_COLOURS = {
    Verdict.PASS: "green",
    Verdict.WARN: "orange",
    Verdict.FAIL: "red",
    Verdict.COULD_NOT_RUN: "grey",
}
