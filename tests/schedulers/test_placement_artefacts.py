"""Placement artefacts for rack-scale domains: Slurm's topology/block with a block per NVLink domain (topology.conf and
topology.yaml), served beside the tree with `plugin=block`, and a ComputeDomain per NVLink domain for Kubernetes
(NVIDIA's DRA driver), from the rack page and the API.

Debian bookworm's slurmctld is 22.05, which has no topology/block (Slurm 23.11+): the block file is checked against
Slurm's documented syntax by parsing it here, and read by a real slurmctld with the plugin below: the host's if it has
one, else Debian trixie's 24.11 that .ci/slurm-block unpacks (CI runs it)."""

import re

import pytest
import yaml
from django.test import Client
from django.urls import reverse

from apps.inventory.demo import ClusterShape, load_cluster
from apps.inventory.models import Node, NvlinkDomain
from apps.parsers.slurm import compress_hostlist, expand_hostlist
from apps.schedulers.compute_domain import ManifestError, check_manifest, compute_domain, manifest_yaml
from apps.schedulers.services import scheduled_nodes
from apps.schedulers.topology_conf import block_topology
from tests.live_server import need

from .slurmctld import block_slurm, start_controller, yaml_slurm

pytestmark = pytest.mark.django_db

SHAPE = ClusterShape(compute_nodes=8, rack_scale_racks=1)  # one GB200 NVL72 rack (nvl01) beside eight servers
BLOCK_LINE = re.compile(r"^BlockName=(\S+) Nodes=(\S+)$")
SIZES_LINE = re.compile(r"^BlockSizes=(\d+(?:,\d+)*)$")


def parse_blocks(text: str) -> tuple[dict[str, list[str]], list[int]]:
    """topology.conf for topology/block as Slurm documents it: BlockName=… Nodes=<host list> lines, one BlockSizes=."""
    blocks, sizes = {}, []
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        if match := BLOCK_LINE.match(line):
            assert match[1] not in blocks, f"block {match[1]} twice"
            blocks[match[1]] = expand_hostlist(match[2])
        elif match := SIZES_LINE.match(line):
            assert not sizes, "BlockSizes twice"
            sizes = [int(size) for size in match[1].split(",")]
        else:
            raise AssertionError(f"not a topology/block line: {line!r}")
    return blocks, sizes


@pytest.fixture
def nvl72():
    load_cluster(SHAPE)
    return NvlinkDomain.objects.get(name="nvl01")


def test_one_block_per_nvlink_domain_holding_its_trays(nvl72):
    blocks = block_topology()
    parsed, sizes = parse_blocks(blocks.text)
    trays = sorted(Node.objects.filter(nvlink_domain=nvl72).values_list("hostname", flat=True))
    assert parsed == {"nvl01": trays} and len(trays) == 18
    assert "BlockName=nvl01 Nodes=nvl01-t[01-18]" in blocks.text
    assert sizes == blocks.block_sizes == [18]  # one domain: the base block only
    servers = set(scheduled_nodes().filter(nvlink_domain__isnull=True).values_list("hostname", flat=True))
    assert set(blocks.unplaced) == servers and len(servers) == 8

    # topology.yaml: the tree as the cluster's default, the blocks beside it (Slurm 25.05's format).
    document = yaml.safe_load(blocks.yaml)
    tree, block = document
    assert (tree["topology"], tree["cluster_default"], block["topology"], block["cluster_default"]) == (
        "tree-a",
        True,
        "nvlink",
        False,
    )
    assert block["block"] == {"block_sizes": [18], "blocks": [{"block": "nvl01", "nodes": "nvl01-t[01-18]"}]}
    assert {"switch", "nodes"} <= set(tree["tree"]["switches"][0])


def test_a_retired_tray_leaves_its_block_and_sizes_follow_the_smallest_domain(nvl72):
    Node.objects.filter(hostname="nvl01-t18").update(status="retired")
    parsed, sizes = parse_blocks(block_topology().text)
    assert "nvl01-t18" not in parsed["nvl01"] and sizes == [17]


def test_no_rack_scale_system_no_blocks(demo_cluster):
    blocks = block_topology()
    assert parse_blocks(blocks.text) == ({}, []) and blocks.blocks == []
    assert len(blocks.unplaced) == scheduled_nodes().count()


def test_the_download_and_the_api_serve_the_blocks_and_refuse_a_bad_plugin(nvl72, browser_as, api_as, viewer):
    page = browser_as(viewer).get(reverse("scheduler-topology-conf") + "?plugin=block")
    assert page.status_code == 200 and page["Content-Disposition"] == 'attachment; filename="topology.conf"'
    assert page.content.decode() == block_topology().text
    tree = browser_as(viewer).get(reverse("scheduler-topology-conf"))
    assert "SwitchName=" in tree.content.decode() and "BlockName" not in tree.content.decode()
    refused = browser_as(viewer).get(reverse("scheduler-topology-conf") + "?plugin=dragonfly")
    assert refused.status_code == 400 and refused.content.decode().startswith("plugin:")
    assert browser_as(viewer).get(reverse("scheduler-topology-yaml")).content.decode() == block_topology().yaml

    answer = api_as(viewer).get("/api/slurm-topology/?plugin=block").json()
    assert (answer["plugin"], answer["plane"], answer["block_sizes"], answer["text"]) == (
        "block",
        None,
        [18],
        block_topology().text,
    )
    assert answer["blocks"][0]["name"] == "nvl01" and len(answer["blocks"][0]["nodes"]) == 18
    assert api_as(viewer).get("/api/slurm-topology/").json()["plugin"] == "tree"
    refused = api_as(viewer).get("/api/slurm-topology/?plugin=dragonfly")
    assert refused.status_code == 400 and "plugin" in refused.json()


def test_the_compute_domain_is_a_valid_manifest_for_the_domain(nvl72):
    text = manifest_yaml(nvl72)
    (document,) = [doc for doc in yaml.safe_load_all(text)]
    assert (document["apiVersion"], document["kind"], document["metadata"]["name"]) == (
        "resource.nvidia.com/v1beta1",
        "ComputeDomain",
        "nvl01",
    )
    assert document["spec"] == {
        "numNodes": 18,
        "channel": {"resourceClaimTemplate": {"name": "nvl01-channel"}, "allocationMode": "Single"},
    }
    annotations = document["metadata"]["annotations"]
    assert annotations["rackpilot.io/nvlink-cluster-uuid"] == str(nvl72.cluster_uuid)
    assert annotations["rackpilot.io/compute-trays"] == "nvl01-t[01-18]"
    check_manifest(document)  # the CRD's schema and the client's ObjectMeta


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda doc: doc["spec"].pop("numNodes"), "numNodes"),
        (lambda doc: doc["spec"].__setitem__("numNodes", -1), "spec/numNodes"),
        (lambda doc: doc["spec"]["channel"].__setitem__("allocationMode", "Some"), "allocationMode"),
        (lambda doc: doc["spec"]["channel"].pop("resourceClaimTemplate"), "resourceClaimTemplate"),
        (lambda doc: doc["spec"].__setitem__("nodes", ["a"]), "nodes"),
        (lambda doc: doc["metadata"].__setitem__("name", "NVL_01"), "metadata/name"),
        (lambda doc: doc.__setitem__("apiVersion", "resource.nvidia.com/v1alpha1"), "apiVersion"),
    ],
)
def test_the_check_refuses_what_the_api_server_would(nvl72, change, field):
    document = compute_domain(nvl72)
    change(document)
    with pytest.raises(ManifestError, match=re.escape(field)):
        check_manifest(document)


def test_the_rack_page_and_the_api_offer_it(nvl72, browser_as, api_as, viewer, api_client):
    page = browser_as(viewer).get(reverse("rack-detail", args=[nvl72.rack.public_id])).content.decode()
    link = reverse("scheduler-compute-domain", args=[nvl72.public_id])
    assert f'href="{link}"' in page and "plugin=block" in page
    download = browser_as(viewer).get(link)
    assert download.status_code == 200 and download["Content-Disposition"] == (
        'attachment; filename="computedomain-nvl01.yaml"'
    )
    assert download.content.decode() == manifest_yaml(nvl72)
    listed = api_as(viewer).get("/api/compute-domains/").json()["results"]
    assert [(row["name"], row["system"], len(row["nodes"])) for row in listed] == [("nvl01", "GB200 NVL72", 18)]
    one = api_as(viewer).get(f"/api/compute-domains/{nvl72.public_id}/").json()
    assert one["manifest"] == manifest_yaml(nvl72)
    assert Client().get(link).status_code == 302  # signed in only
    assert api_client.get("/api/compute-domains/").status_code in (401, 403)


def read_blocks(slurm, nodes: list[str], text: str, directory) -> tuple[dict, str]:
    """The blocks a real slurmctld with topology/block read from `text` (`scontrol show topology`: BlockName and
    AggregatedBlock lines), and its log."""
    controller = start_controller(directory, nodes, topology=text, plugin="block", slurm=slurm)
    try:
        shown = controller.run("scontrol", "show", "topology")
    finally:
        controller.stop()
    assert shown.returncode == 0, shown.stderr
    read = {}
    for line in shown.stdout.splitlines():
        fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
        name = fields.get("BlockName") or fields.get("AggregatedBlock")
        if name:
            read[name] = (expand_hostlist(fields["Nodes"]), int(fields["BlockSize"]))
    return read, controller.log.read_text(errors="replace")


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("racks", [1, 2])
def test_a_real_slurmctld_with_the_block_plugin_reads_the_blocks(racks, tmp_path):
    slurm, why = block_slurm()
    need(slurm is not None, why)
    load_cluster(ClusterShape(compute_nodes=8, rack_scale_racks=racks))
    if racks == 2:  # a retired tray: the smallest domain (17 trays) sets the base block, and the pair aggregates
        Node.objects.filter(hostname="nvl02-t18").update(status="retired")
    blocks = block_topology()
    nodes = list(scheduled_nodes().order_by("hostname").values_list("hostname", flat=True))
    read, log = read_blocks(slurm, nodes, blocks.text, tmp_path / "slurm")
    base = blocks.block_sizes[0]
    expected = {block.name: (block.nodes, base) for block in blocks.blocks}
    if racks == 2:
        assert blocks.block_sizes == [17, 34]
        expected["nvl[01-02]"] = (blocks.blocks[0].nodes + blocks.blocks[1].nodes, 34)
    assert read == expected
    # The servers in no NVLink domain: Slurm says no block reaches them (docs/schedulers.md, "topology/block").
    assert f"blocks lack access to {len(blocks.unplaced)} nodes" in log and len(blocks.unplaced) == 8


@pytest.mark.django_db(transaction=True)
def test_a_real_slurmctld_reads_the_tree_and_the_blocks_from_topology_yaml(tmp_path):
    # A mixed fleet's file (Slurm 25.05+): the tree for every node as the cluster's default, and the NVLink domain's
    # block beside it for the partition that names it, as the file's header says to.
    slurm, why = yaml_slurm()
    need(slurm is not None, why)
    load_cluster(ClusterShape(compute_nodes=8, rack_scale_racks=1))
    blocks = block_topology()
    nodes = list(scheduled_nodes().order_by("hostname").values_list("hostname", flat=True))
    trays = blocks.blocks[0].nodes
    partition = f"PartitionName=nvl Nodes={compress_hostlist(trays)} Topology=nvlink State=UP"
    controller = start_controller(
        tmp_path / "slurm", nodes, topology_yaml=blocks.yaml, partitions=(partition,), slurm=slurm
    )
    try:
        shown = {name: controller.run("scontrol", "show", "topology", *name) for name in [(), ("tree-a",), ("nvlink",)]}
        nvl = controller.run("scontrol", "show", "partition", "nvl")
    finally:
        controller.stop()
    assert all(answer.returncode == 0 for answer in shown.values()), [answer.stderr for answer in shown.values()]

    def read(text: str) -> dict:
        fields = [dict(part.split("=", 1) for part in line.split() if "=" in part) for line in text.splitlines()]
        return {
            one.get("SwitchName") or one.get("BlockName"): (
                expand_hostlist(one["Nodes"]),
                one.get("Switches", "").split(",") if one.get("Switches") else one.get("BlockSize"),
            )
            for one in fields
            if one
        }

    tree = read(shown[("tree-a",)].stdout)
    assert read(shown[()].stdout) == tree  # the tree is the cluster's default
    switches = yaml.safe_load(blocks.yaml)[0]["tree"]["switches"]
    leaves = {one["switch"]: expand_hostlist(one["nodes"]) for one in switches if "nodes" in one}
    assert {name: tree[name][0] for name in leaves} == leaves
    assert tree["fabric-a"] == (nodes, ["spine-a1", "spine-a2"])  # every node under the switch above the spines
    assert read(shown[("nvlink",)].stdout) == {"nvl01": (trays, "18")}
    assert "Topology=nvlink" in nvl.stdout, nvl.stdout
