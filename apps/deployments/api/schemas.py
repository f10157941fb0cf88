"""JSON schemas of a deployment's `options` and `criteria`, for the OpenAPI schema, built from the rules that check
them (options.errors, artefacts.options_errors, criteria.errors) so the two cannot drift apart.

Requests get the full rules (enums, ranges, patterns). Answers get the shape alone: a finished deployment keeps the
versions it was planned with, which a later catalogue may no longer offer. What a schema cannot state is in the
descriptions: the versions must also suit each other (the catalogue's compatibility rules).
"""

from apps.deployments import catalogue, criteria, options
from apps.deployments.artefacts import base as artefact_rules
from apps.deployments.choices import Comparator
from apps.inventory.choices import MTU_MAX, MTU_MIN, FirmwareComponent


def _pattern(regex) -> str:
    """A Python full-match regex as a JSON Schema pattern (ECMA 262 knows `$`, not `\\Z`)."""
    body = regex.pattern.removeprefix("^").removesuffix("\\Z")
    return f"^(?:{body})$"


def _whole(low: int, high: int | None = None) -> dict:
    return {"type": "integer", "minimum": low, **({"maximum": high} if high is not None else {})}


IFNAME = artefact_rules.IFNAME_RE.pattern.removeprefix("^").removesuffix("\\Z")
IFNAME_LIST = f"^(?:(?:{IFNAME})(?:,(?:{IFNAME}))*)?$"  # NCCL's lists: names joined by commas, or none
OPTION_RULES: dict[str, dict[str, dict]] = {
    "versions": {name: {"type": "string", "enum": list(versions)} for name, versions in catalogue.SOFTWARE.items()},
    "baselines": {
        component: {
            "type": "string",
            "maxLength": 40,
            "pattern": f"^(?:{options.FIRMWARE_VERSION.pattern})?$",
            "description": "The firmware version every node should run; empty: no baseline.",
        }
        for component in FirmwareComponent.values
    },
    "network": {
        "mtu": _whole(MTU_MIN, MTU_MAX),
        "rss_queues": _whole(1, 63),
        "rdma_priority": _whole(0, 7),
        "dscp": _whole(0, 63),
        "ecn": {"type": "boolean"},
    },
    "nccl": {
        "socket_ifname": {
            "type": "string",
            "pattern": IFNAME_LIST,
            "description": "Interface names, comma-separated (NCCL_SOCKET_IFNAME).",
        },
        "ib_hca": {
            "type": "string",
            "pattern": IFNAME_LIST,
            "description": "RDMA devices, comma-separated (NCCL_IB_HCA).",
        },
        "debug": {"type": "string", "enum": list(artefact_rules.NCCL_DEBUG_LEVELS)},
    },
    "cgroup": {
        "slice": {"type": "string", "pattern": _pattern(options.SLICE), "description": "A systemd slice unit."},
        "system_cpus_per_socket": _whole(0),
        "system_memory_gib": _whole(0),
    },
    "scheduler": {
        "scheduler_name": {
            "type": "string",
            "maxLength": 253,
            "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
            "description": "A lower-case DNS name.",
        },
        "placement": {"type": "string", "enum": list(artefact_rules.PLACEMENTS)},
        "idle_reclaim_minutes": _whole(1, 10080),
    },
    "checkpoints": {
        "every_steps": _whole(1),
        "mount": {
            "type": "string",
            "pattern": f"^(?!(.*/)?\\.\\.(/|$))(?:{options.PATH.pattern})$",
            "description": "An absolute path without `..`.",
        },
        "tier": {"type": "string", "pattern": _pattern(artefact_rules.TOKEN_RE)},
        "keep_last": _whole(1),
    },
    "acceptance": {
        "cluster": {
            "type": "boolean",
            "description": "Phase 5 after the per-node phases: multi-node NCCL, the sweep for a slow node or link, "
            "HPL-MxP (default: on for two nodes or more; never on one).",
        },
    },
}
ENVIRONMENT_RULE = {
    "type": "object",
    "description": "The plan's own variables, the whole set (an edit replaces it). Names start with "
    + ", ".join(artefact_rules.ALLOWED_ENV_PREFIXES)
    + "; none that loads code ("
    + ", ".join(artefact_rules.CODE_LOADING_ENV_PARTS)
    + ") and none Rackpilot sets itself ("
    + ", ".join(sorted(artefact_rules.RESERVED_ENV_NAMES))
    + "). Values are one line of printable text.",
    "additionalProperties": {"type": "string"},
}


def options_schema(*, strict: bool) -> dict:
    sections = {}
    for section in options.SECTIONS:
        if section == "environment":
            rule = ENVIRONMENT_RULE if strict else {"type": "object", "additionalProperties": {"type": "string"}}
        else:
            fields = OPTION_RULES[section]
            rule = {
                "type": "object",
                "properties": fields if strict else {name: {"type": spec["type"]} for name, spec in fields.items()},
            }
            if strict:
                rule["additionalProperties"] = False
        sections[section] = rule
    return {
        "type": "object",
        "description": "The plan's options by section; an edit names only what it changes. The software versions "
        "must also suit each other (the catalogue's compatibility rules); an error names the path, e.g. "
        "`options.versions.cuda`.",
        "properties": sections,
        **({"additionalProperties": False} if strict else {}),
    }


def _criterion(*, strict: bool) -> dict:
    number = {"type": "number", "minimum": 0} if strict else {"type": "number"}
    fields = {
        "comparator": {"type": "string", "enum": list(Comparator.values)} if strict else {"type": "string"},
        "threshold": {**number, "nullable": True},
        "warn_threshold": {**number, "nullable": True},
        "reference": {"type": "string"},
        "unit": {"type": "string"},
        "retries": {**_whole(0, 10), "nullable": True} if strict else {"type": "integer", "nullable": True},
        "cooldown_seconds": {**number, **({"maximum": 600} if strict else {}), "nullable": True},
        "description": {"type": "string"},
    }
    return {"type": "object", "properties": fields, **({"additionalProperties": False} if strict else {})}


def criteria_schema(*, strict: bool) -> dict:
    return {
        "type": "object",
        "description": "Acceptance criteria by check; an edit names only the checks and fields it changes.",
        "properties": {check: _criterion(strict=strict) for check in criteria.DEFAULTS},
        **({"additionalProperties": False} if strict else {}),
    }
