"""The top bar's items and which one is the page's section: the item whose address has the same first path segment
as the page, so exactly one is highlighted (a discovery job at /discovery/jobs/... is Discovery, not Jobs); of two
such items, the longer address the page is under (/remediation/windows/ is Maintenance windows, a repair at
/remediation/repairs/... Remediation)."""

from django.urls import reverse

# The bar's groups in the order it shows them, each (label, items); an item is (label, url name) and owns the first
# segment of its address ("" for /). A group of one item is a plain link; the others open a menu, so the bar stays one
# row at 1440 px with all 20 pages (it wrapped to two rows).
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
            ("Maintenance windows", "maintenance-windows"),
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


def _owner(path: str, urls: list[str]) -> str:
    """The address of the page's item: of those with its first segment, the longest it is under, else the shortest."""
    same = [url for url in urls if _section(url) == _section(path)]
    under = [url for url in same if path.startswith(url)]
    return max(under, key=len) if under else min(same, key=len, default="")


def navigation(request) -> dict:
    """Context processor: `nav`, the bar's groups as {label, items, active}, each item {label, url, active}; at most
    one item is active, and its group with it."""
    grouped = [(group, [{"label": label, "url": reverse(name)} for label, name in names]) for group, names in GROUPS]
    here = _owner(request.path, [item["url"] for _, items in grouped for item in items])
    groups = []
    for group, items in grouped:
        for item in items:
            item["active"] = item["url"] == here
        groups.append({"label": group, "items": items, "active": any(item["active"] for item in items)})
    return {"nav": groups}
