"""Reference figures shipped with Rackpilot (docs/benchmarks.md says where each comes from), and the lookup of the
reference a test is judged against: the node's GPU SKU, inside a node (NVLink) or across nodes (its data NICs)."""

from collections import Counter

from apps.benchmarks.choices import GIB, Collective, Scope
from apps.inventory.choices import NicPurpose

NVLINK = "nvlink"

# (SKU, fabric, scope, expected, warn, fail) for all_reduce busbw in GB/s at sizes of 1 GiB and up.
SHIPPED = [
    ("H100 SXM", NVLINK, Scope.INTRA, 450.0, 360.0, 300.0),
    ("H200 SXM", NVLINK, Scope.INTRA, 450.0, 360.0, 300.0),
    ("A100 SXM 80GB", NVLINK, Scope.INTRA, 230.0, 205.0, 180.0),
    ("H100 SXM", "roce-8x400g", Scope.INTER, 360.0, 330.0, 290.0),
    ("H200 SXM", "roce-8x400g", Scope.INTER, 360.0, 330.0, 290.0),
    ("H100 SXM", "ib-8x400g", Scope.INTER, 360.0, 330.0, 290.0),
    ("H200 SXM", "ib-8x400g", Scope.INTER, 360.0, 330.0, 290.0),
    ("A100 SXM 80GB", "roce-16x100g", Scope.INTER, 190.0, 170.0, 150.0),
    ("A100 SXM 80GB", "ib-8x200g", Scope.INTER, 190.0, 170.0, 150.0),
]
SOURCES = {
    Scope.INTRA: "docs/benchmarks.md#references (intra-node all_reduce, 8 GPUs, NVLink)",
    Scope.INTER: "docs/benchmarks.md#references (inter-node all_reduce, one rail per GPU)",
}


def shipped_rows() -> list[dict]:
    """The shipped references as field values."""
    return [
        {
            "sku_name": name,
            "fabric": fabric,
            "scope": scope,
            "collective": Collective.ALL_REDUCE,
            "min_size_bytes": GIB,
            "expected_gbps": expected,
            "warn_gbps": warn,
            "fail_gbps": fail,
            "source": SOURCES[scope],
        }
        for name, fabric, scope, expected, warn, fail in SHIPPED
    ]


def fabric_of(node) -> str:
    """'roce-8x400g': the transport, count and speed of a node's data NICs ('' when it has none)."""
    nics = [nic for nic in node.nics.all() if nic.purpose == NicPurpose.DATA]
    if not nics:
        return ""
    (transport, speed), _ = Counter((nic.transport, nic.speed_gbps) for nic in nics).most_common(1)[0]
    return f"{transport}-{len(nics)}x{speed}g"


def sync_shipped(reference_model) -> int:
    """Create the shipped references that are missing (edited rows are left as they are); returns how many."""
    created = 0
    for row in shipped_rows():
        keys = {name: row.pop(name) for name in ("sku_name", "fabric", "scope", "collective")}
        created += reference_model.objects.get_or_create(**keys, defaults=row)[1]
    return created
