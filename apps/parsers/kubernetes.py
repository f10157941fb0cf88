"""kubectl get pods [-A] -o wide: the pods and the node each one runs on. kubectl get nodes -o json: each node's
cordon, taints and conditions (at the end).

kubectl pads every column to its widest cell plus three spaces, and two headers hold a space ("NOMINATED NODE",
"READINESS GATES"), as can a cell ("2 (5m ago)" under RESTARTS): cells are cut at the header's column starts, not
at spaces. Without -A there is no NAMESPACE column; without -o wide no IP or NODE.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from .common import Result, require_content, shorten
from .errors import ParseError

HEADERS = ("NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED NODE", "READINESS GATES")
HEADER_RE = re.compile("|".join(re.escape(name) for name in sorted(HEADERS, key=len, reverse=True)))
NO_RESOURCES = re.compile(r"^No resources found")


@dataclass
class Pod(Result):
    name: str
    namespace: str | None
    ready: str
    status: str
    restarts: str
    age: str
    ip: str | None
    node: str | None
    line: int


@dataclass
class PodList(Result):
    pods: list[Pod]

    def on_node(self, node: str) -> list[Pod]:
        return [pod for pod in self.pods if pod.node == node]


def parse_get_pods(text: str) -> PodList:
    lines = require_content(text, "kubectl get pods output")
    number, header = next((n, line) for n, line in enumerate(lines, start=1) if line.strip())
    if NO_RESOURCES.match(header.strip()):
        return PodList(pods=[])
    starts = [(match.start(), match.group()) for match in HEADER_RE.finditer(header)]
    names = [name for _, name in starts]
    if "NAME" not in names or "STATUS" not in names:
        raise ParseError(f"expected the NAME ... STATUS header of kubectl get pods, got {shorten(header)}", number)
    pods = []
    for line_number, line in enumerate(lines[number:], start=number + 1):
        if not line.strip():
            continue
        cells = {}
        for index, (start, name) in enumerate(starts):
            end = starts[index + 1][0] if index + 1 < len(starts) else len(line)
            cells[name] = line[start:end].strip()
        if not cells["NAME"] or not cells["STATUS"]:
            raise ParseError(f"expected a pod row under the header, got {shorten(line)}", line_number)
        pods.append(
            Pod(
                name=cells["NAME"],
                namespace=cells.get("NAMESPACE"),
                ready=cells.get("READY", ""),
                status=cells["STATUS"],
                restarts=cells.get("RESTARTS", ""),
                age=cells.get("AGE", ""),
                ip=cells.get("IP"),
                node=cells.get("NODE") if cells.get("NODE") not in (None, "<none>") else None,
                line=line_number,
            )
        )
    return PodList(pods=pods)


# --- kubectl get nodes -o json ---------------------------------------------------------------------------------------

# The conditions every kubelet reports; any other (node-problem-detector's, the GPU Operator's health checks) is an
# extra problem detector's, True when its problem is there. Of the kubelet's own, Ready is good when True and the
# pressure/network ones are bad when True.
KUBELET_CONDITIONS = ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable")


@dataclass
class NodeCondition(Result):
    type: str
    status: str  # True, False, Unknown
    reason: str
    message: str
    since: str  # lastTransitionTime, ISO 8601 (UTC)


@dataclass
class NodeTaint(Result):
    key: str
    value: str
    effect: str  # NoSchedule, PreferNoSchedule, NoExecute
    time_added: str  # ISO 8601, set by Kubernetes for NoExecute taints only

    @property
    def text(self) -> str:
        """As kubectl taint takes it: key=value:Effect (key:Effect without a value)."""
        return f"{self.key}{'=' + self.value if self.value else ''}:{self.effect}"


@dataclass
class KubernetesNode(Result):
    """One node as the API server holds it: cordoned or not (spec.unschedulable), its taints and conditions."""

    name: str
    unschedulable: bool
    taints: list[NodeTaint]
    conditions: list[NodeCondition]

    @property
    def ready(self) -> str:
        """The Ready condition's status (True, False, Unknown); Unknown when the kubelet never reported it."""
        return next((condition.status for condition in self.conditions if condition.type == "Ready"), "Unknown")

    @property
    def problems(self) -> list[NodeCondition]:
        """Conditions that report a problem: any but Ready that is True."""
        return [condition for condition in self.conditions if condition.type != "Ready" and condition.status == "True"]


@dataclass
class KubernetesNodes(Result):
    nodes: list[KubernetesNode]

    def by_name(self) -> dict[str, KubernetesNode]:
        return {node.name: node for node in self.nodes}


def _stamp(value) -> str:
    return value.isoformat() if value is not None else ""


def parse_get_nodes(text: str) -> KubernetesNodes:
    """`kubectl get nodes -o json` (a List of Nodes) or `kubectl get node NAME -o json` (one Node), read through the
    official client's models (kubernetes.client.V1Node): the types the API server documents, dates parsed."""
    from kubernetes.client import ApiClient

    try:
        document = json.loads(text)
    except ValueError as error:
        raise ParseError(f"not JSON: {error}") from error
    if not isinstance(document, dict) or document.get("kind") not in {"List", "NodeList", "Node"}:
        raise ParseError(f"expected kubectl's Node or List of Nodes, got {shorten(text)}")
    items = [document] if document["kind"] == "Node" else document.get("items") or []
    if any(not isinstance(item, dict) or item.get("kind", "Node") != "Node" for item in items):
        raise ParseError("the list holds something other than Nodes")
    client = ApiClient()
    try:
        models = [client.deserialize(json.dumps(item), "V1Node", "application/json") for item in items]
    except (ValueError, TypeError) as error:
        first = str(error).splitlines()[:2]  # the client's validation error names the field on its second line
        raise ParseError(f"not a Kubernetes Node: {shorten(' '.join(first))}") from error
    finally:
        client.close()
    nodes = []
    for model in models:
        if model.metadata is None or not model.metadata.name:
            raise ParseError("a Node without metadata.name")
        spec, status = model.spec, model.status
        nodes.append(
            KubernetesNode(
                name=model.metadata.name,
                unschedulable=bool(spec and spec.unschedulable),
                taints=[
                    NodeTaint(taint.key, taint.value or "", taint.effect, _stamp(taint.time_added))
                    for taint in (spec.taints if spec and spec.taints else [])
                ],
                conditions=[
                    NodeCondition(
                        condition.type,
                        condition.status,
                        condition.reason or "",
                        condition.message or "",
                        _stamp(condition.last_transition_time),
                    )
                    for condition in (status.conditions if status and status.conditions else [])
                ],
            )
        )
    return KubernetesNodes(nodes=nodes)
