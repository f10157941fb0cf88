"""The Kubernetes (and Slurm) files the scaling and spot policies hand an operator, rendered from an action's plan
and validated like the deployments' artefacts (apps.deployments.artefacts): the official client's models for core
kinds (HorizontalPodAutoscaler v2, PriorityClass, Node, tolerations), a JSON schema for KEDA's ScaledObject."""

import re

import yaml

from apps.core.text import counted, noun
from apps.deployments.artefacts.base import (
    DNS_LABEL_RE,
    DNS_SUBDOMAIN_RE,
    TEXT_MEDIA_TYPE,
    YAML_MEDIA_TYPE,
    Artefact,
    ArtefactError,
    comment,
    dump_yaml,
    load_yaml,
)
from apps.deployments.artefacts.k8s import check_kubernetes_model, check_schema

SPOT_TAINT = "rackpilot.io/spot"
CAPACITY_LABEL = "rackpilot.io/capacity"
PREEMPTIBLE_CLASS = "rackpilot-preemptible"
CRITICAL_CLASS = "rackpilot-critical"
UTIL_METRIC = "DCGM_FI_DEV_GPU_UTIL"
PROMETHEUS = "http://prometheus.monitoring.svc:9090"  # the usual in-cluster address; edit to yours


def k8s_name(name: str) -> str:
    """A Rackpilot name as a Kubernetes object name (DNS-1123 label): lower case, other characters as '-'."""
    text = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")[:63].strip("-")
    return text or "workload"


def _object(api_version: str, kind: str, name: str, *, labels: dict | None = None, **fields) -> dict:
    """A Kubernetes object: its apiVersion, kind and metadata (the name, labels when given), then its own fields."""
    metadata = {"name": name, "labels": labels} if labels else {"name": name}
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata, **fields}


def _yaml_artefact(name: str, filename: str, header: list[str], documents: list[dict], description: str) -> Artefact:
    """A YAML file of `documents` (one or more, `---` between) under a comment of `header`'s lines."""
    return Artefact(
        name=name,
        filename=filename,
        media_type=YAML_MEDIA_TYPE,
        content=comment(header) + "---\n".join(dump_yaml(document) for document in documents),
        description=description,
    )


def _documents(name: str, content: str) -> list:
    try:
        documents = [document for document in yaml.safe_load_all(content) if document is not None]
    except yaml.YAMLError as exc:
        raise ArtefactError(name, f"not valid YAML: {exc}") from exc
    if not documents:
        raise ArtefactError(name, "no document")
    return documents


# --- elastic scaling ------------------------------------------------------------------------------------------------


def _behaviour(row: dict) -> dict:
    """Scale out once utilisation held for the window; scale in only after the cool-down (no flapping)."""
    return {
        "scaleUp": {
            "stabilizationWindowSeconds": 60 * row["window_minutes"],
            "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}],
        },
        "scaleDown": {
            "stabilizationWindowSeconds": 60 * row["cool_down_minutes"],
            "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}],
        },
    }


def _deployment_ref(name: str) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "name": name}


def _util_query(row: dict) -> str:
    return f'avg(avg_over_time({UTIL_METRIC}{{pod=~"{row["deployment"]}-.*"}}[{row["window_minutes"]}m]))'


def render_scaled_object(row: dict) -> Artefact:
    name = row["deployment"]
    document = _object(
        "keda.sh/v1alpha1",
        "ScaledObject",
        name,
        spec={
            "scaleTargetRef": _deployment_ref(name),
            "pollingInterval": 30,
            "minReplicaCount": row["min_replicas"],
            "maxReplicaCount": row["max_replicas"],
            "advanced": {"horizontalPodAutoscalerConfig": {"behavior": _behaviour(row)}},
            "triggers": [
                {
                    "type": "prometheus",
                    "metricType": "Value",
                    "metadata": {
                        "serverAddress": PROMETHEUS,
                        "query": _util_query(row),
                        "threshold": f"{row['threshold_up']:g}",
                    },
                }
            ],
        },
    )
    header = [
        f"Rackpilot: KEDA ScaledObject for inference service {row['service']}. Generated.",
        f"Keeps the replicas' mean GPU utilisation near {row['threshold_up']:g} % ({UTIL_METRIC}, dcgm-exporter",
        "with pod labels), between min and max replicas; scales in only after the cool-down.",
        "Apply with: kubectl apply -f <this file> (set serverAddress to your Prometheus).",
    ]
    return _yaml_artefact(
        "keda-scaledobject",
        f"{name}-scaledobject.yaml",
        header,
        [document],
        f"KEDA ScaledObject: prometheus trigger on GPU utilisation, {row['min_replicas']}–{row['max_replicas']} "
        "replicas.",
    )


def validate_scaled_object(content: str) -> None:
    document = load_yaml("keda-scaledobject", content)
    check_schema("keda-scaledobject", "keda-scaledobject-v1alpha1.json", document)
    spec = document["spec"]
    low, high = spec.get("minReplicaCount", 0), spec.get("maxReplicaCount", 100)
    if low > high:
        raise ArtefactError("keda-scaledobject", "spec.minReplicaCount is above spec.maxReplicaCount")
    behaviour = spec.get("advanced", {}).get("horizontalPodAutoscalerConfig", {}).get("behavior")
    if behaviour is not None:
        check_kubernetes_model("keda-scaledobject", behaviour, "V2HorizontalPodAutoscalerBehavior")
    for index, trigger in enumerate(spec["triggers"]):
        if trigger["type"] == "prometheus":
            missing = {"serverAddress", "query", "threshold"} - set(trigger["metadata"])
            if missing:
                raise ArtefactError("keda-scaledobject", f"triggers[{index}]: needs {', '.join(sorted(missing))}")


def render_hpa(row: dict) -> Artefact:
    name = row["deployment"]
    document = _object(
        "autoscaling/v2",
        "HorizontalPodAutoscaler",
        name,
        spec={
            "scaleTargetRef": _deployment_ref(name),
            "minReplicas": row["min_replicas"],
            "maxReplicas": row["max_replicas"],
            "metrics": [
                {
                    "type": "Pods",
                    "pods": {
                        "metric": {"name": UTIL_METRIC},
                        "target": {"type": "AverageValue", "averageValue": f"{row['threshold_up']:g}"},
                    },
                }
            ],
            "behavior": _behaviour(row),
        },
    )
    header = [
        f"Rackpilot: HorizontalPodAutoscaler for inference service {row['service']} (the alternative to KEDA).",
        f"Needs {UTIL_METRIC} per pod from the custom metrics API (prometheus-adapter). Generated.",
        "Apply with: kubectl apply -f <this file>",
    ]
    return _yaml_artefact(
        "hpa",
        f"{name}-hpa.yaml",
        header,
        [document],
        f"HorizontalPodAutoscaler v2 on per-pod GPU utilisation, {row['min_replicas']}–{row['max_replicas']} replicas.",
    )


def validate_hpa(content: str) -> None:
    document = load_yaml("hpa", content)
    hpa = check_kubernetes_model("hpa", document, "V2HorizontalPodAutoscaler")
    if hpa.kind != "HorizontalPodAutoscaler" or hpa.api_version != "autoscaling/v2":
        raise ArtefactError("hpa", "expected an autoscaling/v2 HorizontalPodAutoscaler")
    spec = hpa.spec
    if spec is None or not spec.scale_target_ref or not spec.max_replicas:
        raise ArtefactError("hpa", "spec.scaleTargetRef and spec.maxReplicas are required")
    if (spec.min_replicas or 1) > spec.max_replicas:
        raise ArtefactError("hpa", "spec.minReplicas is above spec.maxReplicas")


# --- spot capacity --------------------------------------------------------------------------------------------------


def _taint() -> dict:
    return {"key": SPOT_TAINT, "value": "true", "effect": "NoSchedule"}


def _priority_class(name: str, value: int, preemption: str, description: str) -> dict:
    return _object(
        "scheduling.k8s.io/v1",
        "PriorityClass",
        name,
        value=value,
        globalDefault=False,
        preemptionPolicy=preemption,
        description=description,
    )


def render_priority_classes(plan: list[dict]) -> Artefact:
    classes = [
        _priority_class(
            PREEMPTIBLE_CLASS, 1000, "Never", "Preemptible (spot) workloads: first to go, never evict others."
        ),
        _priority_class(
            CRITICAL_CLASS,
            1000000,
            "PreemptLowerPriority",
            "Critical workloads: may evict preemptible pods to get a node.",
        ),
    ]
    return _yaml_artefact(
        "priority-classes",
        "priority-classes.yaml",
        ["Rackpilot: priority classes for spot capacity. Generated.", "Apply with: kubectl apply -f <this file>"],
        classes,
        f"PriorityClasses {PREEMPTIBLE_CLASS} (never preempts) and {CRITICAL_CLASS}.",
    )


def validate_priority_classes(content: str) -> None:
    for document in _documents("priority-classes", content):
        found = check_kubernetes_model("priority-classes", document, "V1PriorityClass")
        if found.kind != "PriorityClass" or found.value is None or not found.metadata or not found.metadata.name:
            raise ArtefactError("priority-classes", "each document is a PriorityClass with a name and a value")


def render_spot_nodes(plan: list[dict]) -> Artefact:
    hostnames = sorted({host for row in plan for host in row["hostnames"]})
    nodes = [
        _object("v1", "Node", host, labels={CAPACITY_LABEL: "spot"}, spec={"taints": [_taint()]}) for host in hostnames
    ]
    header = [
        "Rackpilot: the spot nodes' label and taint (only preemptible pods tolerate it). Generated.",
        f"Apply with: kubectl taint nodes <node> {SPOT_TAINT}=true:NoSchedule && "
        f"kubectl label nodes <node> {CAPACITY_LABEL}=spot",
    ]
    return _yaml_artefact(
        "spot-nodes",
        "spot-nodes.yaml",
        header,
        nodes,
        f"Label and NoSchedule taint for {counted(len(hostnames), 'spot node')}.",
    )


def validate_spot_nodes(content: str) -> None:
    for document in _documents("spot-nodes", content):
        node = check_kubernetes_model("spot-nodes", document, "V1Node")
        if not node.metadata or not DNS_SUBDOMAIN_RE.match(node.metadata.name or ""):
            raise ArtefactError("spot-nodes", "each Node needs a valid name")
        if not any(taint.key == SPOT_TAINT for taint in (node.spec and node.spec.taints) or []):
            raise ArtefactError("spot-nodes", f"{node.metadata.name}: no {SPOT_TAINT} taint")


def placement_patch(row: dict) -> dict:
    """The strategic-merge patch of one preemptible workload's pod template."""
    return {
        "metadata": {"name": row["deployment"]},
        "spec": {
            "template": {
                "spec": {
                    "priorityClassName": PREEMPTIBLE_CLASS,
                    "tolerations": [{**_taint(), "operator": "Equal"}],
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [
                                    {
                                        "matchExpressions": [
                                            {"key": CAPACITY_LABEL, "operator": "In", "values": ["spot"]}
                                        ]
                                    }
                                ]
                            }
                        }
                    },
                }
            }
        },
    }


def render_pod_placement(plan: list[dict]) -> Artefact:
    """Per preemptible workload: the patch that gives its pods the priority class, the toleration and the node
    affinity that keeps them on spot nodes."""
    patches = [placement_patch(row) for row in plan]
    header = [
        "Rackpilot: pod placement of the preemptible workloads (one patch each). Generated.",
        "Apply with: kubectl patch deployment <name> --patch-file <its document> (or a job's pod template).",
    ]
    return _yaml_artefact(
        "pod-placement",
        "preemptible-pod-placement.yaml",
        header,
        patches,
        f"priorityClassName, toleration and spot node affinity for {counted(len(patches), 'workload')}.",
    )


def validate_pod_placement(content: str) -> None:
    for document in _documents("pod-placement", content):
        name = (document.get("metadata") or {}).get("name", "") if isinstance(document, dict) else ""
        if not DNS_LABEL_RE.match(str(name)):
            raise ArtefactError("pod-placement", f"{name!r} is not a valid workload name")
        spec = (document.get("spec") or {}).get("template", {}).get("spec") or {}
        unknown = set(spec) - {"priorityClassName", "tolerations", "affinity"}
        if unknown:
            raise ArtefactError(
                "pod-placement",
                f"{name}: unexpected pod spec {noun(len(unknown), 'field')} {', '.join(sorted(unknown))}",
            )
        if spec.get("priorityClassName") != PREEMPTIBLE_CLASS:
            raise ArtefactError("pod-placement", f"{name}: priorityClassName must be {PREEMPTIBLE_CLASS}")
        tolerations = [
            check_kubernetes_model("pod-placement", toleration, "V1Toleration")
            for toleration in spec.get("tolerations") or []
        ]
        if not any(toleration.key == SPOT_TAINT for toleration in tolerations):
            raise ArtefactError("pod-placement", f"{name}: no toleration of {SPOT_TAINT}")
        check_kubernetes_model("pod-placement", spec.get("affinity") or {}, "V1Affinity")


def render_slurm(plan: list[dict]) -> Artefact:
    hostnames = sorted({host for row in plan for host in row["hostnames"]})
    lines = [
        "PreemptType=preempt/qos",
        "PreemptMode=REQUEUE",
        f"PartitionName=spot Nodes={','.join(hostnames)} PriorityTier=1 PreemptMode=REQUEUE State=UP",
    ]
    header = comment(
        [
            "Rackpilot: the Slurm equivalent, a preemptible partition (slurm.conf lines) and QOS. Generated.",
            "Then: sacctmgr add qos preemptible Priority=0 PreemptMode=requeue",
            "      sacctmgr modify qos normal set Preempt=preemptible",
            "Preemptible jobs: sbatch --partition=spot --qos=preemptible --requeue ...",
        ]
    )
    return Artefact(
        name="slurm-spot",
        filename="slurm-spot.conf",
        media_type=TEXT_MEDIA_TYPE,
        content=header + "\n".join(lines) + "\n",
        description=f"Slurm partition 'spot' on {counted(len(hostnames), 'node')}, requeued on preemption.",
    )


def validate_slurm(content: str) -> None:
    partitions = 0
    for number, line in enumerate(content.splitlines(), start=1):
        if not line or line.startswith("#"):
            continue
        pairs = line.split()
        if not all(re.fullmatch(r"[A-Za-z]+=[A-Za-z0-9/_,.-]+", pair) for pair in pairs):
            raise ArtefactError("slurm-spot", f"line {number}: not Key=Value pairs")
        fields = dict(pair.split("=", 1) for pair in pairs)
        if "PartitionName" in fields:
            partitions += 1
            if not all(DNS_SUBDOMAIN_RE.match(host) for host in fields.get("Nodes", "").split(",")):
                raise ArtefactError("slurm-spot", f"line {number}: Nodes must list host names")
    if partitions != 1:
        raise ArtefactError("slurm-spot", "expected one partition line")


VALIDATORS = {
    "keda-scaledobject": validate_scaled_object,
    "hpa": validate_hpa,
    "priority-classes": validate_priority_classes,
    "spot-nodes": validate_spot_nodes,
    "pod-placement": validate_pod_placement,
    "slurm-spot": validate_slurm,
}


def validated(artefacts: list[Artefact]) -> list[Artefact]:
    """The artefacts, each parsed back and checked; ArtefactError names the first that fails."""
    for artefact in artefacts:
        VALIDATORS[artefact.name](artefact.content)
    return artefacts
