"""Slurm's HealthCheckProgram that asks Rackpilot about its node (scripts/rackpilot-healthcheck), served as a
download so a node's configuration management fetches the one that matches this Rackpilot."""

from pathlib import Path

from django.conf import settings

SCRIPT = Path(settings.BASE_DIR) / "scripts" / "rackpilot-healthcheck"


def healthcheck_script() -> str:
    return SCRIPT.read_text(encoding="utf-8")
