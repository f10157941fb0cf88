"""kubectl and scontrol as a controller answers a node drain: the lines kubectl prints, scontrol's silence on
success; a node the cluster does not know is the real tools' error (when the caller offers the cluster's nodes)."""

from apps.simulator.terminal import CommandOutput, Context, fail, ok

# What the GPU Operator runs on every GPU node: `kubectl drain --ignore-daemonsets` leaves these and says so.
DAEMONSETS = (
    "kube-system/kube-proxy",
    "gpu-operator/nvidia-device-plugin-daemonset",
    "gpu-operator/nvidia-dcgm-exporter",
)


def _known(context: Context, node: str) -> bool:
    return context.peers is None or node == context.hostname or context.peers(node) is not None


def kubectl(context: Context, argv: list[str]) -> CommandOutput:
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


COMMANDS = {"kubectl": kubectl, "scontrol": scontrol}
