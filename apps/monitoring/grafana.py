"""Grafana dashboards and provisioning for the same views as the portal's pages, from the same metric names.

Grafana is optional: the portal draws its own charts. Sites that already run Grafana download these files (or
`manage.py grafana_export DIR`) and mount them; docker/compose.yaml mounts them into its Grafana container. Every
panel's query is PromQL over the real exporters' names (dcgm-exporter, vLLM) and the SLO rules' recorded series
(apps/monitoring/slo.py), so a dashboard works against any Prometheus that scrapes the same targets.
"""

import io
import json
import zipfile
from dataclasses import dataclass

import yaml

from apps.monitoring import slo

DATASOURCE_UID = "rackpilot-prometheus"
FOLDER = "Rackpilot"
DASHBOARD_DIR = "/var/lib/grafana/dashboards/rackpilot"


@dataclass(frozen=True)
class Panel:
    title: str
    expr: str
    legend: str
    unit: str
    description: str = ""
    stack: bool = False


def _host_filter() -> str:
    return f'{slo.HOST_LABEL}=~"$host"'


def _service_filter() -> str:
    return f'{slo.SERVICE_LABEL}=~"$service"'


def cluster_panels() -> list[Panel]:
    hosts = _host_filter()
    return [
        Panel(
            "GPU utilisation", f"avg by ({slo.HOST_LABEL}) (DCGM_FI_DEV_GPU_UTIL{{{hosts}}})", "{{Hostname}}", "percent"
        ),
        Panel(
            "SM active",
            f"avg by ({slo.HOST_LABEL}) (DCGM_FI_PROF_SM_ACTIVE{{{hosts}}})",
            "{{Hostname}}",
            "percentunit",
            "Share of cycles with at least one warp resident: utilisation counts a GPU busy on one SM as 100 %.",
        ),
        Panel("Power", f"sum by ({slo.HOST_LABEL}) (DCGM_FI_DEV_POWER_USAGE{{{hosts}}})", "{{Hostname}}", "watt"),
        Panel(
            "Energy per hour",
            f"sum by ({slo.HOST_LABEL}) (increase(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{{hosts}}}[1h]))"
            f" / {slo.MJ_PER_KWH:g}",
            "{{Hostname}}",
            "kwatth",
        ),
        Panel(
            "GPU temperature", f"max by ({slo.HOST_LABEL}) (DCGM_FI_DEV_GPU_TEMP{{{hosts}}})", "{{Hostname}}", "celsius"
        ),
        Panel("SM clock", f"min by ({slo.HOST_LABEL}) (DCGM_FI_DEV_SM_CLOCK{{{hosts}}})", "{{Hostname}}", "rothz"),
        Panel(
            "Clock event reasons",
            f"max by ({slo.HOST_LABEL}, gpu) (DCGM_FI_DEV_CLOCKS_EVENT_REASONS{{{hosts}}}) > 0",
            "{{Hostname}} GPU {{gpu}}",
            "none",
            "The bitmask of why clocks are held down (power cap, thermal, HW slowdown); 0 is not drawn.",
        ),
        Panel(
            "XID errors",
            f"max by ({slo.HOST_LABEL}, gpu) (DCGM_FI_DEV_XID_ERRORS{{{hosts}}}) > 0",
            "{{Hostname}} GPU {{gpu}}",
            "none",
            "The last XID each GPU reported; the portal's node page lists every one.",
        ),
        Panel(
            "Uncorrectable ECC errors",
            f"sum by ({slo.HOST_LABEL}) (DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{{{hosts}}})",
            "{{Hostname}}",
            "none",
        ),
        Panel(
            "Remapped rows (uncorrectable) and remap failures",
            f"sum by ({slo.HOST_LABEL}) (DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS{{{hosts}}})"
            f" or sum by ({slo.HOST_LABEL}) (DCGM_FI_DEV_ROW_REMAP_FAILURE{{{hosts}}})",
            "{{Hostname}}",
            "none",
            "A remap failure means the GPU has no spare rows left: it needs an RMA.",
        ),
        Panel(
            "NVLink errors per minute",
            f"sum by ({slo.HOST_LABEL}) (rate(DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL{{{hosts}}}[5m])) * 60",
            "{{Hostname}}",
            "none",
        ),
    ]


def service_panels() -> list[Panel]:
    service = _service_filter()
    return [
        Panel(
            "Generated tokens/s",
            f"sum by ({slo.SERVICE_LABEL}) (rate(vllm:generation_tokens_total{{{service}}}[5m]))",
            "{{service}}",
            "none",
        ),
        Panel(
            "p99 end-to-end latency",
            f"histogram_quantile(0.99, sum by ({slo.SERVICE_LABEL}, le) "
            f"(rate(vllm:e2e_request_latency_seconds_bucket{{{service}}}[5m])))",
            "{{service}}",
            "s",
        ),
        Panel(
            "p99 time to first token",
            f"histogram_quantile(0.99, sum by ({slo.SERVICE_LABEL}, le) "
            f"(rate(vllm:time_to_first_token_seconds_bucket{{{service}}}[5m])))",
            "{{service}}",
            "s",
        ),
        Panel(
            "Requests running and waiting",
            f"sum by ({slo.SERVICE_LABEL}) (vllm:num_requests_running{{{service}}})"
            f" or sum by ({slo.SERVICE_LABEL}) (vllm:num_requests_waiting{{{service}}})",
            "{{service}}",
            "none",
        ),
        Panel(
            "SLO burn rate (1 h)",
            "max by (slo) (rackpilot:slo_burn_rate1h)",
            "{{slo}}",
            "none",
            "1 spends the error budget exactly over the SLO window; the page alert fires above 14.4 (1 h and 5 min).",
        ),
        Panel(
            "SLO compliance (30 d)",
            "avg by (slo) (avg_over_time(rackpilot:slo_good[30d]))",
            "{{slo}}",
            "percentunit",
        ),
    ]


TRAINING_LABEL = "training_job"  # apps/monitoring/metrics.py: not `job`, which Prometheus sets to the scrape job


def _training_filter() -> str:
    return f'{TRAINING_LABEL}=~"$training_job"'


def training_panels() -> list[Panel]:
    """The "Job progress / loss" row: Rackpilot's own gauges (its /metrics, scraped as the `rackpilot` job), fed by
    the step lines the `training-progress` kind reads from each active training job's log."""
    jobs = _training_filter()
    return [
        Panel(
            "Loss",
            f"max by ({TRAINING_LABEL}) (rackpilot_training_loss{{{jobs}}})",
            "{{training_job}}",
            "none",
            "The loss of the newest step line Rackpilot read from the job's log.",
        ),
        Panel(
            "Step",
            f"max by ({TRAINING_LABEL}) (rackpilot_training_step{{{jobs}}})",
            "{{training_job}}",
            "none",
            "A flat line is a run that stopped; a drop is a restart from an older checkpoint.",
        ),
        Panel(
            "Samples/s",
            f"max by ({TRAINING_LABEL}) (rackpilot_training_samples_per_second{{{jobs}}})",
            "{{training_job}}",
            "none",
        ),
        Panel(
            "Seconds since the newest step line",
            f"time() - max by ({TRAINING_LABEL}) (rackpilot_training_step_timestamp_seconds{{{jobs}}})",
            "{{training_job}}",
            "s",
            "Grows while the job prints no step: hung in a collective, crashed, or waiting for a restart.",
        ),
    ]


def _target(expr: str, legend: str) -> dict:
    return {
        "datasource": {"type": "prometheus", "uid": DATASOURCE_UID},
        "expr": expr,
        "legendFormat": legend,
        "refId": "A",
    }


def _panel(number: int, panel: Panel, top: int = 0, index: int | None = None) -> dict:
    """A timeseries panel; two a row, `index` counting from `top` (the first row of its section)."""
    index = number if index is None else index
    return {
        "id": number,
        "type": "timeseries",
        "title": panel.title,
        "description": panel.description,
        "datasource": {"type": "prometheus", "uid": DATASOURCE_UID},
        "gridPos": {"h": 8, "w": 12, "x": 12 * (index % 2), "y": top + 8 * (index // 2)},
        "fieldConfig": {
            "defaults": {"unit": panel.unit, "custom": {"stacking": {"mode": "normal" if panel.stack else "none"}}},
            "overrides": [],
        },
        "targets": [_target(panel.expr, panel.legend)],
    }


def _variable(name: str, label: str, query: str) -> dict:
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": {"type": "prometheus", "uid": DATASOURCE_UID},
        "query": {"query": query, "refId": f"{name}-values"},
        "includeAll": True,
        "multi": True,
        "allValue": ".*",
        "current": {"text": "All", "value": "$__all"},
        "refresh": 2,
    }


def _row(number: int, title: str, top: int) -> dict:
    return {
        "id": number,
        "type": "row",
        "title": title,
        "collapsed": False,
        "gridPos": {"h": 1, "w": 24, "x": 0, "y": top},
        "panels": [],
    }


def _layout(panels: list[Panel], rows: tuple[tuple[str, list[Panel]], ...]) -> list[dict]:
    """The panels, then each row: its header across the width, then its panels two a row below it."""
    laid = [_panel(number, panel) for number, panel in enumerate(panels)]
    top = 8 * ((len(panels) + 1) // 2)
    for title, members in rows:
        laid.append(_row(len(laid), title, top))
        top += 1
        laid += [_panel(len(laid) + index, panel, top, index) for index, panel in enumerate(members)]
        top += 8 * ((len(members) + 1) // 2)
    return laid


def dashboard(
    uid: str,
    title: str,
    panels: list[Panel],
    variables: list[dict],
    rows: tuple[tuple[str, list[Panel]], ...] = (),
) -> dict:
    return {
        "uid": uid,
        "title": title,
        "tags": ["rackpilot"],
        "timezone": "browser",
        "schemaVersion": 39,
        "time": {"from": "now-24h", "to": "now"},
        "refresh": "30s",
        "templating": {"list": variables},
        "panels": _layout(panels, rows),
    }


def dashboards() -> dict[str, dict]:
    """File name → dashboard JSON."""
    host = _variable("host", "Node", f"label_values(DCGM_FI_DEV_GPU_UTIL, {slo.HOST_LABEL})")
    service = _variable("service", "Service", f"label_values(vllm:generation_tokens_total, {slo.SERVICE_LABEL})")
    training = _variable("training_job", "Training job", f"label_values(rackpilot_training_step, {TRAINING_LABEL})")
    return {
        "rackpilot-cluster.json": dashboard("rackpilot-cluster", "Rackpilot · GPUs", cluster_panels(), [host]),
        "rackpilot-services.json": dashboard(
            "rackpilot-services",
            "Rackpilot · Workloads and SLOs",
            service_panels(),
            [service, training],
            rows=(("Job progress / loss", training_panels()),),
        ),
    }


def provisioning(prometheus_url: str, dashboards_dir: str = DASHBOARD_DIR) -> dict[str, str]:
    """Grafana's provisioning files (path inside Grafana's provisioning directory → YAML)."""
    datasources = {
        "apiVersion": 1,
        "datasources": [
            {
                "name": "Rackpilot Prometheus",
                "uid": DATASOURCE_UID,
                "type": "prometheus",
                "access": "proxy",
                "url": prometheus_url,
                "isDefault": True,
                "editable": False,
            }
        ],
    }
    providers = {
        "apiVersion": 1,
        "providers": [
            {
                "name": "rackpilot",
                "folder": FOLDER,
                "type": "file",
                "disableDeletion": True,
                "allowUiUpdates": False,
                "options": {"path": dashboards_dir},
            }
        ],
    }
    return {
        "datasources/rackpilot.yaml": yaml.safe_dump(datasources, sort_keys=False),
        "dashboards/rackpilot.yaml": yaml.safe_dump(providers, sort_keys=False),
    }


def bundle(prometheus_url: str, dashboards_dir: str = DASHBOARD_DIR) -> dict[str, str]:
    """Every file, by its path under one directory: provisioning/… and dashboards/… (which Grafana must find at
    `dashboards_dir`)."""
    files = {f"provisioning/{path}": text for path, text in provisioning(prometheus_url, dashboards_dir).items()}
    files.update({f"dashboards/{name}": json.dumps(board, indent=2) for name, board in dashboards().items()})
    return files


def bundle_zip(prometheus_url: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, text in sorted(bundle(prometheus_url).items()):
            archive.writestr(f"rackpilot-grafana/{path}", text)
    return buffer.getvalue()
