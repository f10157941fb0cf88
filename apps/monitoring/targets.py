"""Prometheus's file-based service discovery targets, written from the inventory and the workloads.

Three files in RACKPILOT_PROMETHEUS_TARGETS_DIR: dcgm.json (one target per compute node with GPUs), node.json (the
same nodes' node_exporter, for their NICs' link rates and errors) and vllm.json (one per inference service). With
RACKPILOT_SIM_EXPORTERS set (host:port) every target is the simulator's exporter, with the node's or service's path;
empty, a node is scraped at its management IP on dcgm-exporter's port 9400 (node_exporter's 9100) and a service at its
endpoint's host and port (vLLM serves /metrics beside /v1). Each file is replaced atomically (written aside,
then renamed), and only when its content changes, so Prometheus never reads half a file.
"""

import json
import os
import tempfile
from pathlib import Path
from urllib.parse import quote, urlsplit

from django.conf import settings

from apps.inventory.models import Node
from apps.workloads.models import InferenceService

DCGM_EXPORTER_PORT = 9400
NODE_EXPORTER_PORT = 9100


def node_targets(*, exporters: str, port: int = DCGM_EXPORTER_PORT, path: str = "metrics") -> list[dict]:
    nodes = Node.objects.filter(gpus__isnull=False).select_related("rack").distinct().order_by("hostname")
    groups = []
    for node in nodes:
        labels = {"node": node.hostname, "rack": node.rack.name if node.rack else ""}
        if exporters:
            groups.append(
                {
                    "targets": [exporters],
                    "labels": {
                        **labels,
                        "instance": node.hostname,
                        "__metrics_path__": f"/nodes/{quote(node.hostname)}/{path}",
                    },
                }
            )
        elif node.management_ip:
            address = f"[{node.management_ip}]" if ":" in node.management_ip else node.management_ip
            groups.append({"targets": [f"{address}:{port}"], "labels": {**labels, "instance": node.hostname}})
    return groups


def service_targets(*, exporters: str) -> list[dict]:
    groups = []
    for service in InferenceService.objects.order_by("name"):
        labels = {"service": service.name, "instance": service.name}
        if exporters:
            path = f"/services/{quote(service.name, safe='')}/metrics"
            groups.append({"targets": [exporters], "labels": {**labels, "__metrics_path__": path}})
        elif service.endpoint:
            parts = urlsplit(service.endpoint)
            port = parts.port or (443 if parts.scheme == "https" else 80)
            groups.append(
                {"targets": [f"{parts.hostname}:{port}"], "labels": {**labels, "__scheme__": parts.scheme or "http"}}
            )
    return groups


def replace_file(path: Path, text: str) -> bool:
    """Write text to path unless it already holds it: aside, then renamed over it (a reader never sees half a
    file); whether it was written."""
    if path.exists() and path.read_text() == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, aside = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "w") as file:
            file.write(text)
        os.chmod(aside, 0o644)
        os.replace(aside, path)
    except BaseException:
        Path(aside).unlink(missing_ok=True)
        raise
    return True


def write_targets(*, directory: str | None = None, exporters: str | None = None) -> list[Path]:
    """Write dcgm.json, vllm.json and node.json; returns the files that changed."""
    folder = Path(directory or settings.RACKPILOT_PROMETHEUS_TARGETS_DIR)
    exporters = settings.RACKPILOT_SIM_EXPORTERS if exporters is None else exporters
    changed = []
    for name, groups in (
        ("dcgm.json", node_targets(exporters=exporters)),
        ("vllm.json", service_targets(exporters=exporters)),
        ("node.json", node_targets(exporters=exporters, port=NODE_EXPORTER_PORT, path="node-metrics")),
    ):
        if replace_file(folder / name, json.dumps(groups, indent=2) + "\n"):
            changed.append(folder / name)
    return changed
