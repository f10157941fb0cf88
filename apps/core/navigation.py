"""The top bar's items and which one is the page's section: the item whose address has the same first path segment
as the page, so exactly one is highlighted (a discovery job at /discovery/jobs/... is Discovery, not Jobs)."""

from django.urls import reverse

# The bar's groups in the order it shows them, each (label, items); an item is (label, url name) and owns the first
# segment of its address ("" for /). A group of one item is a plain link; the others open a menu, so the bar stays one
# row at 1440 px with all 18 pages (it wrapped to two rows).
GROUPS = (
    ("Dashboard", (("Dashboard", "dashboard"),)),
    (
        "Inventory",
        (
            ("Nodes", "node-list"),
            ("Racks", "rack-list"),
            ("Switches", "switch-list"),
            ("Topology", "topology"),
            ("Import / export", "inventory-transfer"),
        ),
    ),
    (
        "Operations",
        (
            ("Jobs", "jobs-page"),
            ("Discovery", "discovery"),
            ("Deployments", "deployment-list"),
            ("Automation", "automation"),
            ("Simulator", "simulator"),
        ),
    ),
    ("Benchmarks", (("Benchmarks", "benchmarks"),)),
    (
        "Health",
        (
            ("Diagnosis", "incident-list"),
            ("Remediation", "remediation"),
            ("Reliability", "reliability"),
            ("Telemetry", "telemetry"),
        ),
    ),
    ("Workloads", (("Workloads", "workload-list"), ("Policies", "policy-list"))),
    ("Audit log", (("Audit log", "audit-log"),)),
)
ITEMS = tuple(item for _, items in GROUPS for item in items)


def _section(path: str) -> str:
    return path.lstrip("/").split("/", 1)[0]


def navigation(request) -> dict:
    """Context processor: `nav`, the bar's groups as {label, items, active}, each item {label, url, active}; at most
    one item is active, and its group with it."""
    here = _section(request.path)
    groups = []
    for group, names in GROUPS:
        items = [{"label": label, "url": reverse(name)} for label, name in names]
        for item in items:
            item["active"] = _section(item["url"]) == here
        groups.append({"label": group, "items": items, "active": any(item["active"] for item in items)})
    return {"nav": groups}
