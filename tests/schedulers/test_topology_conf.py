"""Slurm's topology.conf from the inventory: the demo cluster's leaves with their nodes, the spines with their leaves,
one switch above the spines; served as a download and over the API; and read by a real slurmctld's tree plugin."""

import re

import pytest
from django.urls import reverse

from apps.inventory.models import Cable, Node
from apps.parsers.slurm import expand_hostlist
from apps.schedulers.services import scheduled_nodes
from apps.schedulers.topology_conf import topology_conf
from tests.live_server import need

from .slurmctld import missing_binaries, start_controller

LINE = re.compile(r"^SwitchName=(\S+) (Nodes|Switches)=(\S+)$")


def parse(text: str) -> dict[str, tuple[str, list[str]]]:
    """topology.conf as Slurm's format has it: SwitchName=… then Nodes=… or Switches=… (a host list)."""
    switches = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        match = LINE.match(line)
        assert match, f"not a topology.conf line: {line!r}"
        switches[match[1]] = (match[2], expand_hostlist(match[3]))
    return switches


@pytest.mark.django_db
def test_every_compute_node_sits_under_the_leaf_it_is_cabled_to(demo_cluster):
    conf = topology_conf(plane="A")
    switches = parse(conf.text)
    leaves = {name: members for name, (kind, members) in switches.items() if kind == "Nodes"}
    assert conf.leaves == len(leaves) == 4 and conf.unplaced == []
    placed = sorted(host for members in leaves.values() for host in members)
    assert placed == sorted(scheduled_nodes().values_list("hostname", flat=True))  # each exactly once
    gpu012 = Node.objects.get(hostname="gpu012")
    cabled = {
        cable.b_switch.name
        for cable in Cable.objects.filter(a_nic__node=gpu012, b_switch__plane="A").select_related("b_switch")
    }
    assert [name for name, members in leaves.items() if "gpu012" in members] == sorted(cabled)
    spines = {name: members for name, (kind, members) in switches.items() if name.startswith("spine-")}
    assert spines and all(members == sorted(leaves) for members in spines.values())
    assert switches["fabric-a"] == ("Switches", sorted(spines))
    assert all(name.endswith("-a") or name.startswith("spine-a") or name == "fabric-a" for name in switches)


@pytest.mark.django_db
def test_a_node_moved_to_another_leaf_moves_in_the_file(demo_cluster):
    cable = Cable.objects.filter(a_nic__node__hostname="gpu001", b_switch__plane="A").first()
    other = Cable.objects.filter(a_nic__node__hostname="gpu030", b_switch__plane="A").first().b_switch
    assert cable.b_switch != other
    cable.b_switch, cable.b_port = other, "swp-moved"  # a port of the new leaf nothing else uses
    cable.save()
    leaves = parse(topology_conf(plane="A").text)
    assert "gpu001" in leaves[other.name][1]


@pytest.mark.django_db
def test_the_download_and_the_api_serve_it_and_a_bad_plane_is_refused(demo_cluster, browser_as, api_as, viewer):
    page = browser_as(viewer).get(reverse("scheduler-topology-conf") + "?plane=B")
    assert page.status_code == 200 and page["Content-Disposition"] == 'attachment; filename="topology.conf"'
    assert "SwitchName=leaf-r01-b Nodes=" in page.content.decode()
    assert browser_as(viewer).get(reverse("scheduler-topology-conf") + "?plane=Z").status_code == 400
    answer = api_as(viewer).get("/api/slurm-topology/?plane=A")
    assert answer.status_code == 200 and answer.json()["text"] == topology_conf(plane="A").text
    refused = api_as(viewer).get("/api/slurm-topology/?plane=mgmt")
    assert refused.status_code == 400 and "plane" in refused.json()
    assert api_as(viewer).get("/api/slurm-topology/?planes=A").status_code == 400


@pytest.mark.django_db
def test_anonymous_callers_get_nothing(demo_cluster, client, api_client):
    assert client.get(reverse("scheduler-topology-conf")).status_code == 302
    assert api_client.get("/api/slurm-topology/").status_code in (401, 403)


@pytest.mark.django_db(transaction=True)
def test_a_real_slurmctld_reads_the_file_into_its_switch_tree(demo_cluster, tmp_path):
    missing = missing_binaries()
    need(not missing, f"Slurm is not installed here ({', '.join(missing)} missing): apt-get install slurmctld")
    conf = topology_conf(plane="A")
    nodes = list(scheduled_nodes().order_by("hostname").values_list("hostname", flat=True))
    controller = start_controller(tmp_path / "slurm", nodes, topology=conf.text)
    try:
        shown = controller.run("scontrol", "show", "topology")
    finally:
        controller.stop()
    assert shown.returncode == 0, shown.stderr
    # scontrol prints one line per switch: SwitchName=leaf-r01-a Level=0 LinkSpeed=1 Nodes=gpu[001-008]
    read = {}
    for line in shown.stdout.splitlines():
        fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
        read[fields["SwitchName"]] = fields
    expected = parse(conf.text)
    assert set(read) == set(expected)
    for name, (kind, members) in expected.items():
        if kind == "Nodes":
            assert read[name]["Level"] == "0" and expand_hostlist(read[name]["Nodes"]) == members
        else:
            assert int(read[name]["Level"]) >= 1 and sorted(expand_hostlist(read[name]["Switches"])) == members
    assert read["fabric-a"]["Level"] == "2"
