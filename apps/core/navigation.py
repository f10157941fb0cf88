"""The top bar's items and which one is the page's section: the item whose address has the same first path segment
as the page, so exactly one is highlighted (a discovery job at /discovery/jobs/... is Discovery, not Jobs)."""

from django.urls import reverse

# (label, url name) in the order the bar shows them; each owns the first segment of its address ("" for /).
ITEMS = (
    ("Dashboard", "dashboard"),
    ("Nodes", "node-list"),
    ("Racks", "rack-list"),
    ("Switches", "switch-list"),
    ("Topology", "topology"),
    ("Jobs", "jobs-page"),
    ("Simulator", "simulator"),
    ("Discovery", "discovery"),
    ("Deployments", "deployment-list"),
    ("Benchmarks", "benchmarks"),
    ("Diagnosis", "incident-list"),
    ("Workloads", "workload-list"),
    ("Telemetry", "telemetry"),
    ("Import / export", "inventory-transfer"),
    ("Audit log", "audit-log"),
    ("Automation", "automation"),
    ("Policies", "policy-list"),
    ("Remediation", "remediation"),
)


def _section(path: str) -> str:
    return path.lstrip("/").split("/", 1)[0]


def navigation(request) -> dict:
    """Context processor: `nav`, the bar's items as {label, url, active}; at most one is active."""
    here = _section(request.path)
    items = []
    for label, name in ITEMS:
        url = reverse(name)
        items.append({"label": label, "url": url, "active": _section(url) == here})
    return {"nav": items}
