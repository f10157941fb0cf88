"""kubectl and scontrol as a controller answers a node drain: the lines kubectl prints, scontrol's silence on
success; a node the cluster does not know is the real tools' error (when the caller offers the cluster's nodes).
And `kubectl get pods --all-namespaces -o wide` on a node of a training job: the pods of the job's nodes."""

from datetime import UTC, datetime

from apps.simulator.model import noise
from apps.simulator.terminal import CommandOutput, Context, fail, ok
from apps.simulator.tools.utilisation import NAMESPACE, job_states
from apps.simulator.training import runs_on

# What the GPU Operator runs on every GPU node: `kubectl drain --ignore-daemonsets` leaves these and says so.
DAEMONSETS = (
    "kube-system/kube-proxy",
    "gpu-operator/nvidia-device-plugin-daemonset",
    "gpu-operator/nvidia-dcgm-exporter",
)


def _known(context: Context, node: str) -> bool:
    return context.peers is None or node == context.hostname or context.peers(node) is not None


def kubectl(context: Context, argv: list[str]) -> CommandOutput:
    if argv[1:] == ["get", "pods", "--all-namespaces", "-o", "wide"]:
        return node_pods(context)
    verb, node = (argv[1], argv[2]) if len(argv) > 2 else ("", "")
    if verb not in {"cordon", "uncordon", "drain"}:
        return fail(1, f'error: unknown command "{verb}" for "kubectl"\n')
    if not _known(context, node):
        return fail(1, f'Error from server (NotFound): nodes "{node}" not found\n')
    if verb == "drain":
        pods = ", ".join(f"{name}-{context.seed % 100000:05d}" for name in DAEMONSETS)
        return CommandOutput(
            0,
            f"node/{node} already cordoned\nnode/{node} drained\n",
            f"Warning: ignoring DaemonSet-managed Pods: {pods}\n",
        )
    return ok(f"node/{node} {verb}ed\n")


def scontrol(context: Context, argv: list[str]) -> CommandOutput:
    fields = dict(element.partition("=")[::2] for element in argv[2:] if "=" in element)
    if argv[1:2] != ["update"] or "NodeName" not in fields or fields.get("State") not in {"DRAIN", "RESUME"}:
        return fail(1, "scontrol: error: Invalid input\n")
    if fields["State"] == "DRAIN" and not fields.get("Reason"):
        return fail(1, "You must specify a reason when DOWNING or DRAINING a node. Request denied\n")
    if not _known(context, fields["NodeName"]):
        return fail(1, "slurm_update error: Invalid node name specified\n")
    return ok("")


# --- kubectl get pods --all-namespaces -o wide --------------------------------------------------------------------

POD_COLUMNS = ("NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED NODE")
POD_COLUMNS += ("READINESS GATES",)


def _age(seconds: float) -> str:
    """kubectl's short duration: 45s, 12m, 5h, 3d."""
    seconds = max(int(seconds), 0)
    for size, unit in ((86400, "d"), (3600, "h"), (60, "m")):
        if seconds >= 2 * size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def node_pods(context: Context, now: float | None = None) -> CommandOutput:
    """Every pod on the nodes of the jobs this node runs: their trainer pods (one per node rank), the GPU Operator's
    DaemonSets, and a second trainer where one was placed beside the job's."""
    now = datetime.now(UTC).timestamp() if now is None else now
    rows = []
    for run in runs_on(context.hostname):
        for rank, state in enumerate(job_states(context, run)):
            node = state.hostname
            address = f"10.244.{rank % 250}"
            for number, daemonset in enumerate(DAEMONSETS):
                namespace, name = daemonset.split("/")
                suffix = f"{noise(context.seed, node, daemonset).randrange(16**5):05x}"
                rows.append((namespace, f"{name}-{suffix}", "1/1", "Running", "0", "12d", f"{address}.{2 + number}"))
                rows[-1] += (node,)
            rows.append((NAMESPACE, f"{run.name}-worker-{rank}", "1/1", "Running", "0", _age(now - run.started)))
            rows[-1] += (f"{address}.20", node)
            if state.co_located_pod:
                rows.append((NAMESPACE, state.co_located_pod, "1/1", "Running", "0", "40m", f"{address}.21", node))
    table = [POD_COLUMNS] + [(*row, "<none>", "<none>") for row in dict.fromkeys(rows)]
    widths = [max(len(row[column]) for row in table) for column in range(len(POD_COLUMNS))]
    lines = ["   ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in table]
    if len(table) == 1:
        return CommandOutput(0, "", "No resources found\n")
    return ok("\n".join(lines) + "\n")


COMMANDS = {"kubectl": kubectl, "scontrol": scontrol}
