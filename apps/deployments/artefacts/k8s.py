"""Kubernetes artefacts: the scheduler profile, the training pod template, node labels, the idle-reclaim policy,
each validated against a schema or the official client's models."""

from __future__ import annotations

import json
import math
import re
from functools import cache
from typing import Any

import jsonschema

from apps.core.text import counted, noun
from apps.deployments.artefacts.base import (
    DEPLOYMENT_LABEL,
    DNS_SUBDOMAIN_RE,
    GPU_COUNT_LABEL,
    GPU_RESOURCE,
    LABEL_NAME_RE,
    LABEL_VALUE_RE,
    LEAF_LABEL,
    NUMA_LABEL,
    RACK_LABEL,
    ROLE_LABEL,
    SCHEMA_DIR,
    YAML_MEDIA_TYPE,
    Artefact,
    ArtefactError,
    comment,
    dump_yaml,
    load_yaml,
)

K8S_PRIMITIVES = frozenset({"str", "int", "float", "bool", "object", "datetime", "date", "bytearray", "bytes"})


def _render_kube_scheduler(opts: dict[str, Any], nodes: list[dict[str, Any]], deployment: str) -> Artefact:
    scheduler = opts["scheduler"]
    if scheduler["placement"] == "leaf":
        preference = {"matchExpressions": [{"key": LEAF_LABEL, "operator": "Exists"}]}
        topology = "nodes on a leaf switch; training pods then prefer their peers' leaf (InterPodAffinity)"
    else:
        preference = {"matchExpressions": [{"key": NUMA_LABEL, "operator": "In", "values": ["true"]}]}
        topology = "NUMA-aligned nodes (GPUs and RDMA NICs split evenly over sockets)"
    config = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [
            {
                "schedulerName": scheduler["scheduler_name"],
                "plugins": {
                    "score": {
                        "enabled": [
                            {"name": "NodeResourcesFit", "weight": 5},
                            {"name": "InterPodAffinity", "weight": 5},
                            {"name": "NodeAffinity", "weight": 2},
                        ],
                        "disabled": [{"name": "NodeResourcesBalancedAllocation"}, {"name": "PodTopologySpread"}],
                    }
                },
                "pluginConfig": [
                    {
                        "name": "NodeResourcesFit",
                        "args": {
                            "scoringStrategy": {
                                "type": "MostAllocated",
                                "resources": [
                                    {"name": GPU_RESOURCE, "weight": 10},
                                    {"name": "cpu", "weight": 1},
                                    {"name": "memory", "weight": 1},
                                ],
                            }
                        },
                    },
                    {"name": "InterPodAffinity", "args": {"hardPodAffinityWeight": 10}},
                    {
                        "name": "NodeAffinity",
                        "args": {
                            "addedAffinity": {
                                "preferredDuringSchedulingIgnoredDuringExecution": [
                                    {"weight": 100, "preference": preference}
                                ]
                            }
                        },
                    },
                ],
            }
        ],
    }
    header = comment(
        [
            f"Rackpilot deployment {deployment}: kube-scheduler profile for training jobs. Generated; do not edit.",
            f"Packs GPUs (MostAllocated) and prefers {topology}.",
            "Run as a second scheduler: kube-scheduler --config=<this file>.",
        ]
    )
    return Artefact(
        name="kube-scheduler",
        filename="kube-scheduler-config.yaml",
        media_type=YAML_MEDIA_TYPE,
        content=dump_yaml(config, header),
        description=(
            f"Scheduler profile {scheduler['scheduler_name']!r}: packs GPUs, {scheduler['placement']}-aware placement."
        ),
    )


@cache
def _schema(filename: str) -> jsonschema.protocols.Validator:
    schema = json.loads((SCHEMA_DIR / filename).read_text(encoding="utf-8"))
    validator_class = jsonschema.validators.validator_for(schema)
    validator_class.check_schema(schema)
    return validator_class(schema)


def check_schema(name: str, filename: str, document: Any) -> None:
    error = jsonschema.exceptions.best_match(_schema(filename).iter_errors(document))
    if error is not None:
        where = "/".join(str(part) for part in error.absolute_path) or "(document)"
        raise ArtefactError(name, f"{where}: {error.message}")


def _validate_kube_scheduler(content: str) -> None:
    check_schema("kube-scheduler", "kubescheduler-config-v1.json", load_yaml("kube-scheduler", content))


def _pod_labels(deployment: str) -> dict[str, str]:
    return {DEPLOYMENT_LABEL: deployment, ROLE_LABEL: "trainer"}


def _render_pod_affinity(opts: dict[str, Any], nodes: list[dict[str, Any]], deployment: str) -> Artefact:
    versions = opts["versions"]
    image = opts.get("image") or f"registry.local/rackpilot/trainer:pytorch{versions['pytorch']}-cuda{versions['cuda']}"
    gpus = min(int(node.get("gpus") or 0) for node in nodes)
    selector = {"matchLabels": _pod_labels(deployment)}
    template = {
        "metadata": {"labels": _pod_labels(deployment)},
        "spec": {
            "schedulerName": opts["scheduler"]["scheduler_name"],
            "affinity": {
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": selector, "topologyKey": "kubernetes.io/hostname"}
                    ]
                },
                "podAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 100, "podAffinityTerm": {"labelSelector": selector, "topologyKey": LEAF_LABEL}}
                    ]
                },
            },
            "tolerations": [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [
                {
                    "name": "trainer",
                    "image": image,
                    "resources": {"limits": {GPU_RESOURCE: str(gpus)}},
                }
            ],
        },
    }
    header = comment(
        [
            f"Rackpilot deployment {deployment}: pod template fragment for training jobs. Generated.",
            "One trainer per node (anti-affinity on hostname); peers preferred on the same leaf switch.",
        ]
    )
    return Artefact(
        name="pod-affinity",
        filename="training-pod-template.yaml",
        media_type=YAML_MEDIA_TYPE,
        content=dump_yaml(template, header),
        description="PodTemplateSpec fragment: scheduler name, one pod per node, same-leaf preference, GPU toleration.",
    )


def _model_type(type_name: str) -> tuple[str, str]:
    """Split a kubernetes-client type string into (container kind, inner type)."""
    for pattern, kind in (
        (r"^Optional\[(.*)\]$", "optional"),
        (r"^(?:List|list)\[(.*)\]$", "list"),
        (r"^Dict\[str, (.*)\]$", "dict"),
        (r"^dict\(str, (.*)\)$", "dict"),
    ):
        match = re.match(pattern, type_name)
        if match:
            return kind, match.group(1)
    return "plain", type_name


def unknown_kubernetes_keys(data: Any, type_name: str, path: str = "") -> list[str]:
    """Key paths in ``data`` that the official client model ``type_name`` does not define (it drops them)."""
    from kubernetes.client import models

    kind, inner = _model_type(type_name)
    if kind == "optional":
        return unknown_kubernetes_keys(data, inner, path)
    if kind == "list":
        if not isinstance(data, list):
            return []
        return [
            key for index, item in enumerate(data) for key in unknown_kubernetes_keys(item, inner, f"{path}[{index}]")
        ]
    if kind == "dict":
        if not isinstance(data, dict):
            return []
        return [key for name, item in data.items() for key in unknown_kubernetes_keys(item, inner, f"{path}.{name}")]
    model = getattr(models, inner, None) if inner not in K8S_PRIMITIVES else None
    if model is None or not isinstance(data, dict) or not hasattr(model, "attribute_map"):
        return []
    by_json_key = {json_key: attribute for attribute, json_key in model.attribute_map.items()}
    unknown = []
    for key, value in data.items():
        key_path = f"{path}.{key}" if path else str(key)
        if key not in by_json_key:
            unknown.append(key_path)
        else:
            unknown.extend(unknown_kubernetes_keys(value, model.openapi_types[by_json_key[key]], key_path))
    return unknown


def check_kubernetes_model(name: str, data: Any, type_name: str) -> Any:
    """Deserialize ``data`` with the official client (types, required fields) and refuse unknown keys."""
    from kubernetes.client import ApiClient

    if not isinstance(data, dict):
        raise ArtefactError(name, f"expected a {type_name} mapping")
    unknown = unknown_kubernetes_keys(data, type_name)
    if unknown:
        raise ArtefactError(name, f"unknown {noun(len(unknown), 'field')} for {type_name}: {', '.join(unknown)}")
    client = ApiClient()
    try:
        return client.deserialize(json.dumps(data), type_name, "application/json")
    except (ValueError, TypeError) as exc:
        raise ArtefactError(name, f"not a valid {type_name}: {exc}") from exc
    finally:
        client.close()


def _validate_pod_affinity(content: str) -> None:
    document = load_yaml("pod-affinity", content)
    template = check_kubernetes_model("pod-affinity", document, "V1PodTemplateSpec")
    spec = template.spec
    if spec is None or not spec.scheduler_name:
        raise ArtefactError("pod-affinity", "spec.schedulerName is required")
    anti = spec.affinity and spec.affinity.pod_anti_affinity
    terms = (anti and anti.required_during_scheduling_ignored_during_execution) or []
    if not any(term.topology_key == "kubernetes.io/hostname" for term in terms):
        raise ArtefactError("pod-affinity", "needs required pod anti-affinity on kubernetes.io/hostname")
    for key, value in (template.metadata.labels or {}).items() if template.metadata else ():
        _check_label("pod-affinity", f"metadata.labels.{key}", key, value)


def _numa_aligned(node: dict[str, Any]) -> bool:
    numa = int(node.get("numa_nodes") or 1)
    gpus = int(node.get("gpus") or 0)
    rdma = len(node.get("rdma_devices") or [])
    return gpus > 0 and gpus % numa == 0 and rdma % numa == 0


def _render_node_labels(opts: dict[str, Any], nodes: list[dict[str, Any]], deployment: str) -> Artefact:
    labels: dict[str, dict[str, str]] = {}
    for node in sorted(nodes, key=lambda n: str(n.get("hostname"))):
        hostname = str(node.get("hostname") or "")
        if hostname in labels:
            raise ArtefactError("node-labels", f"hostname {hostname} appears twice")
        entry = {
            RACK_LABEL: str(node.get("rack") or ""),
            LEAF_LABEL: str(node.get("leaf") or ""),
            NUMA_LABEL: "true" if _numa_aligned(node) else "false",
            GPU_COUNT_LABEL: str(int(node.get("gpus") or 0)),
        }
        labels[hostname] = {key: value for key, value in entry.items() if value}
    header = comment(
        [
            f"Rackpilot deployment {deployment}: node labels, hostname -> labels. Generated.",
            "Apply with: kubectl label node <hostname> <key>=<value> ... --overwrite",
            f"{NUMA_LABEL} is 'true' when GPUs and RDMA NICs split evenly over the node's sockets.",
            f"{GPU_COUNT_LABEL} is also published by GPU feature discovery, which keeps it current.",
        ]
    )
    return Artefact(
        name="node-labels",
        filename="node-labels.yaml",
        media_type=YAML_MEDIA_TYPE,
        content=dump_yaml(labels, header),
        description=f"Rack, leaf, NUMA-alignment and GPU-count labels for {counted(len(labels), 'node')}.",
    )


def _check_label(artefact: str, where: str, key: Any, value: Any) -> None:
    if not isinstance(key, str) or not isinstance(value, str):
        raise ArtefactError(artefact, f"{where}: label keys and values must be strings")
    prefix, _, name = key.rpartition("/")
    if (prefix and not DNS_SUBDOMAIN_RE.match(prefix)) or not LABEL_NAME_RE.match(name):
        raise ArtefactError(artefact, f"{where}: {key!r} is not a valid label key")
    if not LABEL_VALUE_RE.match(value):
        raise ArtefactError(artefact, f"{where}: {value!r} is not a valid label value (at most 63 characters)")


def _validate_node_labels(content: str) -> None:
    document = load_yaml("node-labels", content)
    if not isinstance(document, dict) or not document:
        raise ArtefactError("node-labels", "expected a mapping of hostname to labels")
    for hostname, labels in document.items():
        if not isinstance(hostname, str) or not DNS_SUBDOMAIN_RE.match(hostname):
            raise ArtefactError("node-labels", f"{hostname!r} is not a valid node name")
        if not isinstance(labels, dict):
            raise ArtefactError("node-labels", f"{hostname}: labels must be a mapping")
        for key, value in labels.items():
            _check_label("node-labels", hostname, key, value)


def _render_idle_reclaim(opts: dict[str, Any], nodes: list[dict[str, Any]], deployment: str) -> Artefact:
    minutes = opts["scheduler"]["idle_reclaim_minutes"]
    gpus = max(int(node.get("gpus") or 0) for node in nodes) or 8
    # Below half of the node's GPUs requested counts as a fragment worth repacking (e.g. 3 of 8 -> 37 %).
    threshold = math.floor(100 * (gpus // 2) / gpus) if gpus > 1 else 0
    policy = {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "maxNoOfPodsToEvictPerNode": gpus,
        "profiles": [
            {
                "name": f"{deployment}-idle-gpu-reclaim",
                "pluginConfig": [
                    {
                        "name": "DefaultEvictor",
                        "args": {"nodeFit": True},
                    },
                    {
                        "name": "HighNodeUtilization",
                        "args": {"thresholds": {GPU_RESOURCE: threshold}, "numberOfNodes": 0},
                    },
                ],
                "plugins": {"balance": {"enabled": ["HighNodeUtilization"]}},
            }
        ],
    }
    header = comment(
        [
            f"Rackpilot deployment {deployment}: idle GPU reclaim policy for the descheduler. Generated.",
            f"Run: descheduler --policy-config-file=<this file> --descheduling-interval={minutes}m",
            f"Nodes with fewer than {threshold}% of their GPUs requested are emptied so the MostAllocated",
            "scheduler profile repacks their pods and whole nodes become free. Only pods owned by a controller",
            "(so they are recreated) and that fit on another node (nodeFit) are evicted.",
        ]
    )
    return Artefact(
        name="idle-reclaim",
        filename="descheduler-policy.yaml",
        media_type=YAML_MEDIA_TYPE,
        content=dump_yaml(policy, header),
        description=f"Descheduler HighNodeUtilization on {GPU_RESOURCE}, every {minutes} minutes.",
    )


def _validate_idle_reclaim(content: str) -> None:
    check_schema("idle-reclaim", "descheduler-policy-v1alpha2.json", load_yaml("idle-reclaim", content))
    if not re.search(r"^# Run: .*--descheduling-interval=[0-9]+m$", content, re.MULTILINE):
        raise ArtefactError("idle-reclaim", "the header must state the descheduling interval")


ARTEFACTS = {
    "kube-scheduler": (_render_kube_scheduler, _validate_kube_scheduler),
    "pod-affinity": (_render_pod_affinity, _validate_pod_affinity),
    "node-labels": (_render_node_labels, _validate_node_labels),
    "idle-reclaim": (_render_idle_reclaim, _validate_idle_reclaim),
}
