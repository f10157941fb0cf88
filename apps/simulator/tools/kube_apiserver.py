"""The Kubernetes API server's nodes as kubectl on the controller reads and changes them: `kubectl get nodes -o
json`, `kubectl get node NAME -o json`, `kubectl cordon|uncordon NAME`, `kubectl taint nodes NAME KEY=VALUE:EFFECT
[--overwrite]` and `kubectl taint nodes NAME KEY[:EFFECT]-`.

The nodes are the cluster's compute nodes (Context.cluster) and the controller itself (the control plane, with its
`node-role.kubernetes.io/control-plane:NoSchedule` taint). Each kubelet reports Ready and the three pressures False;
what the API server holds beyond that (a cordon, taints, conditions a problem detector such as node-problem-detector
or the GPU Operator's health checks set) is the controller's `kube:<node>` record. A cordoned node carries the
`node.kubernetes.io/unschedulable:NoSchedule` taint Kubernetes adds to it, as a real cluster's does. Messages and
errors are kubectl's (1.30): `node/X cordoned`, `already cordoned`, `tainted`, `untainted`, `not found`."""

import json
import uuid
from datetime import UTC, datetime

from apps.simulator import clock
from apps.simulator.terminal import CommandOutput, Context, fail, ok

KUBELET_VERSION = "v1.30.4"
# When the simulated cluster's nodes joined and last turned Ready: one fixed moment, so a node's conditions read the
# same on every read until something changes them (the heartbeat alone follows the clock).
JOINED = datetime(2026, 1, 5, 8, 0, tzinfo=UTC)
UNSCHEDULABLE = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
CONTROL_PLANE = {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}
EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
KUBELET = (
    ("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
)


def _now() -> datetime:
    return datetime.fromtimestamp(clock.now(), UTC)


def _stamp(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def names(context: Context) -> list[str]:
    """The API server's nodes: the controller (control plane) and the cluster's compute nodes."""
    cluster = [host.hostname for host in (context.cluster() if context.cluster is not None else [])]
    return list(dict.fromkeys([context.hostname, *cluster]))


def _record(context: Context, name: str) -> dict:
    return dict(context.state.kube_nodes.get(name) or {})


def node_object(context: Context, name: str) -> dict:
    """One Node as `kubectl get node NAME -o json` prints it (the fields Rackpilot and a reader look at)."""
    record, now = _record(context, name), _now()
    heartbeat, since = _stamp(now), _stamp(JOINED)
    conditions = [
        {
            "type": kind,
            "status": "False",
            "reason": reason,
            "message": message,
            "lastHeartbeatTime": heartbeat,
            "lastTransitionTime": since,
        }
        for kind, reason, message in KUBELET
    ]
    ready = {
        "type": "Ready",
        "status": "True",
        "reason": "KubeletReady",
        "message": "kubelet is posting ready status",
        "lastHeartbeatTime": heartbeat,
        "lastTransitionTime": since,
    }
    extra = {condition["type"]: condition for condition in record.get("conditions") or []}
    ready = extra.pop("Ready", ready)
    conditions = [extra.pop(condition["type"], condition) for condition in conditions]
    conditions += [*extra.values(), ready]  # the kubelet lists Ready last
    taints = [CONTROL_PLANE] if name == context.hostname else []
    taints += list(record.get("taints") or [])
    if record.get("unschedulable"):
        taints.append(UNSCHEDULABLE)
    spec = {"podCIDR": f"10.244.{names(context).index(name) % 250}.0/24"}
    if record.get("unschedulable"):
        spec["unschedulable"] = True
    if taints:
        spec["taints"] = taints
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}
    if name == context.hostname:
        labels["node-role.kubernetes.io/control-plane"] = ""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels, "creationTimestamp": since},
        "spec": spec,
        "status": {
            "conditions": conditions,
            "nodeInfo": node_info(context, name),
        },
    }


def node_info(context: Context, name: str) -> dict:
    """status.nodeInfo: every field the API server fills (the client's model requires them all)."""
    machine = uuid.uuid5(uuid.NAMESPACE_DNS, f"{context.seed}.{name}")
    return {
        "architecture": "amd64",
        "bootID": str(uuid.uuid5(machine, "boot")),
        "containerRuntimeVersion": "containerd://1.7.22",
        "kernelVersion": "6.1.0-28-amd64",
        "kubeProxyVersion": KUBELET_VERSION,
        "kubeletVersion": KUBELET_VERSION,
        "machineID": machine.hex,
        "operatingSystem": "linux",
        "osImage": "Debian GNU/Linux 12 (bookworm)",
        "systemUUID": str(uuid.uuid5(machine, "system")),
    }


def not_found(name: str) -> CommandOutput:
    return fail(1, f'Error from server (NotFound): nodes "{name}" not found\n')


def get_nodes(context: Context, args: list[str]) -> CommandOutput:
    """`get nodes -o json` (every node, a List) or `get node NAME -o json` (one Node): args after `nodes`."""
    wanted = [arg for arg in args if not arg.startswith("-") and arg != "json"]
    if not ({"-o", "--output"} & set(args) and "json" in args) and "-ojson" not in args:
        return fail(1, "error: this simulated kubectl prints nodes as JSON only (-o json)\n")
    known = names(context)
    if wanted:
        if wanted[0] not in known:
            return not_found(wanted[0])
        return ok(json.dumps(node_object(context, wanted[0]), indent=4) + "\n")
    listing = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [node_object(context, name) for name in known],
        "metadata": {"resourceVersion": ""},
    }
    return ok(json.dumps(listing, indent=4) + "\n")


def cordon(context: Context, verb: str, name: str) -> CommandOutput:
    if name not in names(context):
        return not_found(name)
    record = _record(context, name)
    wanted = verb == "cordon"
    if bool(record.get("unschedulable")) == wanted:
        return ok(f"node/{name} already {verb}ed\n")
    record["unschedulable"] = wanted
    context.change(f"kube:{name}", record)
    return ok(f"node/{name} {verb}ed\n")


def _parse_taint(spec: str) -> tuple[str, str, str, bool] | None:
    """(key, value, effect, remove) of `KEY=VALUE:EFFECT`, `KEY:EFFECT`, `KEY:EFFECT-` or `KEY-`."""
    remove = spec.endswith("-")
    body = spec[:-1] if remove else spec
    keyvalue, colon, effect = body.rpartition(":") if ":" in body else (body, "", "")
    key, _, value = keyvalue.partition("=")
    if not key or (effect and effect not in EFFECTS) or (not remove and (not colon or not effect)):
        return None
    return key, value, effect, remove


def taint(context: Context, args: list[str]) -> CommandOutput:
    """`taint nodes NAME SPEC [--overwrite]`: one node, one taint (what Rackpilot runs)."""
    overwrite = "--overwrite" in args
    rest = [arg for arg in args if arg != "--overwrite"]
    if len(rest) != 3 or rest[0] not in {"nodes", "node", "no"}:
        return fail(1, "error: at least one taint update is required\n")
    name, parsed = rest[1], _parse_taint(rest[2])
    if parsed is None:
        return fail(1, f'error: invalid taint spec: {rest[2]}, unknown taint spec "{rest[2]}"\n')
    if name not in names(context):
        return not_found(name)
    key, value, effect, remove = parsed
    record = _record(context, name)
    taints = list(record.get("taints") or [])
    same = [t for t in taints if t["key"] == key and (not effect or t["effect"] == effect)]
    if remove:
        if not same:
            return fail(1, f'error: taint "{rest[2][:-1]}" not found\n')
        record["taints"] = [t for t in taints if t not in same]
        context.change(f"kube:{name}", record)
        return ok(f"node/{name} untainted\n")
    if same and not overwrite:
        return fail(1, f"error: node {name} already has {key} taint(s) with same effect(s) and --overwrite is false\n")
    added = {"key": key, "effect": effect}
    if value:
        added["value"] = value
    if effect == "NoExecute":
        added["timeAdded"] = _stamp(_now())
    record["taints"] = [t for t in taints if t not in same] + [added]
    context.change(f"kube:{name}", record)
    return ok(f"node/{name} {'modified' if same else 'tainted'}\n")
