"""The rules Prometheus loads: every SLO's recording and alerting rules and the telemetry pages' recorded series
(`slo.rules`, `telemetry_rules`), as one YAML file beside the scrape targets (RULES_FILE in
RACKPILOT_PROMETHEUS_TARGETS_DIR, which docker/prometheus.yml loads through `rule_files`). Without them Prometheus
holds only the exporters' series, and the SLOs and long telemetry windows are worked out from every GPU's samples at
each request. Rewritten when what they are made from changes, only when the text changes; Prometheus reads rule files
at start and on reload only, so it is then asked to reload (`--web.enable-lifecycle`)."""

import logging
import urllib.request
from pathlib import Path

import yaml
from django.conf import settings

from apps.monitoring import slo
from apps.monitoring.models import Slo
from apps.monitoring.targets import replace_file
from apps.monitoring.telemetry import TelemetryError, check_prometheus_url, telemetry_rules

logger = logging.getLogger(__name__)

RULES_FILE = "rackpilot.rules.yml"
RELOAD_TIMEOUT_S = 5


def rules_document() -> dict:
    """The rule groups: the SLOs' (recording, then alerting) and the telemetry pages'."""
    document = slo.rules([row.spec() for row in Slo.objects.select_related("service", "training_job", "rack")])
    document["groups"] += telemetry_rules()
    return document


def rules_text() -> str:
    return yaml.safe_dump(rules_document(), sort_keys=False)


def write_rules(*, directory: str | None = None) -> Path | None:
    """Write the rules file; returns its path when it changed, None when it was already so."""
    path = Path(directory or settings.RACKPILOT_PROMETHEUS_TARGETS_DIR) / RULES_FILE
    return path if replace_file(path, rules_text()) else None


def reload_prometheus(url: str | None = None) -> bool:
    """Ask the Prometheus Rackpilot reads to load its rule files again; False (logged) when there is none, or it
    did not: its lifecycle API is off, or it is down (it reads the file when it starts)."""
    url = settings.RACKPILOT_PROMETHEUS_URL if url is None else url
    if not url:
        return False
    try:
        address = check_prometheus_url(url, allow_link_local=settings.RACKPILOT_PROMETHEUS_ALLOW_LINK_LOCAL)
        request = urllib.request.Request(f"{address}/-/reload", method="POST")
        with urllib.request.urlopen(request, timeout=RELOAD_TIMEOUT_S):  # noqa: S310 (the URL is checked above)
            return True
    except (TelemetryError, OSError) as error:
        logger.warning("Prometheus at %s did not reload its rules: %s", url, error)
        return False


def write_and_reload(*, directory: str | None = None) -> bool:
    """Write the rules and, when they changed, have Prometheus load them; whether they changed."""
    if write_rules(directory=directory) is None:
        return False
    reload_prometheus()
    return True
