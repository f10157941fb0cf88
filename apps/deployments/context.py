"""What the steps see of each node, read from the inventory in one go before a run (or a dry run)."""

from collections import defaultdict

from django.core.exceptions import ObjectDoesNotExist

from apps.deployments import artefacts
from apps.deployments.steps.base import InventoryGpu, Nic, NodeContext
from apps.inventory.choices import NicPurpose, NicTransport
from apps.inventory.models import Cable, Node

# Artefacts written onto every node, by the path the steps read them back from.
NODE_FILES = ("nccl-conf", "environment", "cgroup-slice", "checkpoints")


def load_nodes(node_ids) -> list[Node]:
    """The nodes with what the steps and artefacts read of them, in a fixed number of queries."""
    return list(
        Node.objects.filter(pk__in=node_ids)
        .select_related("rack")
        .prefetch_related(
            "gpus__sku",
            "nics__cable_as_a__b_switch",
            "nics__cable_as_a__b_nic__node",
            "nics__cable_as_b__a_switch",
            "nics__cable_as_b__a_nic__node",
        )
        .order_by("hostname")
    )


def _leaves(nodes: list[Node]) -> dict[int, str]:
    leaves = {}
    cables = Cable.objects.filter(a_nic__node__in=nodes, a_nic__purpose=NicPurpose.DATA, b_switch__isnull=False)
    for node_id, leaf in cables.values_list("a_nic__node_id", "b_switch__name").order_by("a_nic__name"):
        leaves.setdefault(node_id, leaf)
    return leaves


def data_nics(node: Node) -> tuple[Nic, ...]:
    """Data NICs in PCI order; RDMA ones named mlx5_N in that order, as the mlx5 driver numbers them."""
    nics, rdma = [], 0
    for nic in sorted(node.nics.all(), key=lambda nic: nic.name):
        if nic.purpose != NicPurpose.DATA:
            continue
        device = ""
        if nic.rdma_capable and nic.transport in (NicTransport.ROCE, NicTransport.INFINIBAND):
            device, rdma = f"mlx5_{rdma}", rdma + 1
        nics.append(Nic(nic.name, nic.speed_gbps, device, (nic.mac or "").lower(), _peer(nic)))
    return tuple(nics)


def _peer(nic) -> str:
    """Where the NIC's cable goes, as an engineer at the rack reads it: "leaf-r04-a port swp10" or "gpu002 ens1np0"."""
    for cable, far in (("cable_as_a", "b"), ("cable_as_b", "a")):
        try:
            found = getattr(nic, cable)
        except ObjectDoesNotExist:
            continue
        switch, port, other = (
            getattr(found, f"{far}_switch"),
            getattr(found, f"{far}_port"),
            getattr(found, f"{far}_nic"),
        )
        if switch is not None:
            return f"{switch.name} port {port}"
        if other is not None:
            return f"{other.node.hostname} {other.name}"
    return ""


def artefact_nodes(nodes: list[Node]) -> list[dict]:
    leaves = _leaves(nodes)
    rows = []
    for node in nodes:
        nics = data_nics(node)
        rows.append(
            {
                "hostname": node.hostname,
                "rack": node.rack.name if node.rack_id else "",
                "leaf": leaves.get(node.pk, ""),
                "numa_nodes": max(node.numa_nodes, 1),
                "cpu_count": max(node.cpu_cores or 16, 1) * 2,
                "memory_gib": node.memory_gib or 64,
                "gpus": len(node.gpus.all()),
                "data_nics": [nic.name for nic in nics],
                "rdma_devices": [nic.rdma_device for nic in nics if nic.rdma_device],
            }
        )
    return rows


class StoredPlanInvalid(Exception):
    """The plan's stored options no longer pass today's rules (an older release saved them): edit them first.
    ``errors`` maps each option's path (``options.environment.LD_PRELOAD``) to what is wrong with it."""

    def __init__(self, errors: dict[str, str]):
        self.errors = errors
        listed = "; ".join(f"{path}: {message}" for path, message in errors.items())
        super().__init__(f"The plan's saved options are no longer accepted; edit them first ({listed})")


def render_artefacts(deployment, nodes: list[Node] | None = None, *, only: str | None = None) -> list:
    """Every file of the plan, rendered and validated; or only the one named, as a download asks ([] for a name no
    artefact has): each file is rendered to YAML or text and parsed back, which a download of one need not pay for
    every other."""
    if only is not None and only not in artefacts.ARTEFACT_NAMES:
        return []
    nodes = nodes if nodes is not None else load_nodes(deployment.nodes.values_list("pk", flat=True))
    names = [only] if only is not None else artefacts.ARTEFACT_NAMES
    rows = artefact_nodes(nodes)
    try:
        return [artefacts.render(name, deployment.options, rows, deployment_name=deployment.name) for name in names]
    except artefacts.ArtefactError as error:
        # The options as saved fail today's rules or today's nodes (a NIC since removed): the plan is edited first.
        raise StoredPlanInvalid(artefact_problems(error)) from error


def artefact_problems(error) -> dict[str, str]:
    """An artefact's failure as ``options.<path>`` → message: the option it names, else the artefact."""
    if error.errors:
        return {f"options.{path}": message for path, message in error.errors.items()}
    return {f"options.artefacts.{error.name}": str(error.message)}


def _topology_by_node(hostnames: set[str]) -> dict[str, list[tuple[str, str, str]]]:
    """Rules of the topology app that do not pass and name a node (in their offending elements)."""
    from apps.topology.services import evaluate_topology

    found: dict[str, list] = defaultdict(list)
    for rule in evaluate_topology().rules:
        if rule.passed:
            continue
        for element in rule.offending:
            for hostname in hostnames:
                if element == hostname or element.startswith(f"{hostname}/") or element.startswith(f"{hostname} "):
                    found[hostname].append((rule.title, str(rule.verdict), rule.detail))
    return found


def node_contexts(
    deployment, node_ids=None, *, with_topology: bool = True, with_files: bool = True
) -> dict[str, NodeContext]:
    """Contexts for the nodes; without files/topology when only the plan's shape is needed (which steps apply)."""
    node_ids = node_ids if node_ids is not None else deployment.nodes.values_list("pk", flat=True)
    nodes = load_nodes(node_ids)
    files = {}
    if with_files:
        rendered = {artefact.name: artefact for artefact in render_artefacts(deployment, nodes)}
        files = {rendered[name].filename: rendered[name].content for name in NODE_FILES if name in rendered}
    topology = _topology_by_node({node.hostname for node in nodes}) if with_topology else {}
    contexts = {}
    for node in nodes:
        gpus = list(node.gpus.all())
        sku = gpus[0].sku if gpus else None
        contexts[node.hostname] = NodeContext(
            hostname=node.hostname,
            node_id=node.pk,
            sku=sku.name if sku else "",
            gpu_count=len(gpus),
            hbm_reference_gb_per_s=float(sku.mem_bandwidth_reference_tb_per_s) * 1000 if sku else 0.0,
            hbm_datasheet_gb_per_s=float(sku.mem_bandwidth_tb_per_s) * 1000 if sku else 0.0,
            nvlink_gb_per_s=sku.nvlink_gb_per_s if sku else 0,
            pcie_gen=sku.pcie_gen if sku else 5,
            data_nics=data_nics(node),
            options=deployment.options,
            criteria=deployment.criteria,
            files=files,
            topology=tuple(topology.get(node.hostname, ())),
            gpus=tuple(InventoryGpu(gpu.index, gpu.uuid or "", gpu.serial or "") for gpu in gpus),
        )
    return contexts
