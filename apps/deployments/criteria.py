"""Acceptance criteria as data: defaults shipped by a migration, per-SKU rows (API, admins) that override them,
and the snapshot a deployment keeps (editable per deployment) so later edits of the defaults do not change a
finished report."""

from apps.core.text import noun
from apps.deployments.choices import Comparator

FIELDS = (
    "comparator",
    "threshold",
    "warn_threshold",
    "reference",
    "unit",
    "retries",
    "cooldown_seconds",
    "description",
)

# The defaults a fresh installation ships with (the data migration writes these rows).
DEFAULTS: dict[str, dict] = {
    "hbm_bandwidth": {
        "comparator": Comparator.AT_LEAST,
        "threshold": 95.0,
        "warn_threshold": 90.0,
        "reference": "the SKU's reference HBM copy bandwidth",
        "unit": "GB/s",
        "retries": 2,
        "cooldown_seconds": 5.0,
        "description": "nvbandwidth device_local_copy per GPU; the reference is the copy bandwidth a healthy card "
        "measures (about 88% of the datasheet figure).",
    },
    "nvlink_bandwidth": {
        "comparator": Comparator.AT_LEAST,
        "threshold": 400.0,
        "warn_threshold": None,
        "reference": "",
        "unit": "GB/s",
        "retries": 2,
        "cooldown_seconds": 5.0,
        "description": "Slowest GPU-to-GPU pair per GPU, both directions at once (nvbandwidth "
        "device_to_device_bidirectional_memcpy_read_ce, the two directions added).",
    },
    "nccl_busbw": {
        "comparator": Comparator.AT_LEAST,
        "threshold": 300.0,
        "warn_threshold": 250.0,
        "reference": "",
        "unit": "GB/s",
        "retries": 1,
        "cooldown_seconds": 5.0,
        "description": "all_reduce_perf out-of-place bus bandwidth at 1 GiB across the node's GPUs.",
    },
    "nic_link_errors": {
        "comparator": Comparator.AT_MOST,
        "threshold": 0.0,
        "warn_threshold": 1.0,
        "reference": "",
        "unit": "errors/Mframe",
        "retries": 0,
        "cooldown_seconds": 0.0,
        "description": "Cluster acceptance: growth of each data NIC's CRC/FCS and symbol error counters (ethtool -S "
        "rx_crc_errors_phy, rx_symbol_err_phy) over the multi-node NCCL test, per million frames received. Any "
        "error warns; above the warn tier fails.",
    },
    "ptp_offset": {
        "comparator": Comparator.AT_MOST,
        "threshold": 1000.0,
        "warn_threshold": 10000.0,
        "reference": "",
        "unit": "ns",
        "retries": 1,
        "cooldown_seconds": 2.0,
        "description": "chrony's system time offset from its PTP hardware clock reference.",
    },
    "checkpoint_free_space": {
        "comparator": Comparator.AT_LEAST,
        "threshold": 20.0,
        "warn_threshold": 10.0,
        "reference": "",
        "unit": "%",
        "retries": 0,
        "cooldown_seconds": 0.0,
        "description": "Free space on the checkpoint file system.",
    },
}


def resolve(sku=None) -> dict[str, dict]:
    """The criteria for a SKU: the default rows, overridden by that SKU's rows (field by field)."""
    from apps.deployments.models import AcceptanceCriterion

    rows = AcceptanceCriterion.objects.filter(sku__isnull=True)
    if sku is not None:
        rows = rows | AcceptanceCriterion.objects.filter(sku=sku)
    criteria = {check: dict(values) for check, values in DEFAULTS.items()}
    for row in sorted(rows, key=lambda row: row.sku_id is not None):  # defaults first, SKU rows win
        criteria[row.check_name] = {name: getattr(row, name) for name in FIELDS}
    return criteria


def errors(criteria: dict) -> dict[str, str]:
    """What is wrong with an edited criteria snapshot, keyed by `criteria.<check>.<field>`."""
    problems = {}
    if not isinstance(criteria, dict):
        return {"criteria": "Criteria are an object keyed by check name."}
    for check, values in criteria.items():
        key = f"criteria.{check}"
        if check not in DEFAULTS:
            problems[key] = f"Unknown check; known: {', '.join(sorted(DEFAULTS))}."
            continue
        if not isinstance(values, dict):
            problems[key] = "Each check's criterion is an object."
            continue
        unknown = set(values) - set(FIELDS)
        if unknown:
            problems[key] = f"Unknown {noun(len(unknown), 'field')}: {', '.join(sorted(unknown))}."
        for name in ("threshold", "warn_threshold", "cooldown_seconds"):
            value = values.get(name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int | float) or value < 0):
                problems[f"{key}.{name}"] = "A number of 0 or more."
        retries = values.get("retries")
        if retries is not None and (
            isinstance(retries, bool) or not isinstance(retries, int) or not 0 <= retries <= 10
        ):
            problems[f"{key}.retries"] = "A whole number from 0 to 10."
        if values.get("comparator") not in (None, *Comparator.values):
            problems[f"{key}.comparator"] = f"One of {', '.join(Comparator.values)}."
        if (values.get("cooldown_seconds") or 0) > 600:
            problems[f"{key}.cooldown_seconds"] = "At most 600 seconds."
    return problems


def merged(snapshot: dict, edits: dict) -> dict:
    result = {check: dict(values) for check, values in snapshot.items()}
    for check, values in (edits or {}).items():
        result.setdefault(check, dict(DEFAULTS[check])).update(values)
    return result
