"""Switch and port pages, and the cable trace from a GPU's NIC through its leaf to the spines (page and API)."""

import pytest

from apps.inventory.models import Cable, Nic, Node, Switch

pytestmark = pytest.mark.django_db


def test_a_leaf_page_lists_each_port_with_its_far_end_and_what_is_free(browser_as, viewer, demo_cluster):
    leaf = Switch.objects.get(name="leaf-r01-a")
    text = browser_as(viewer).get(f"/switches/{leaf.public_id}/").content.decode()
    # 8 nodes × 4 plane-A NICs down, as many uplinks; 128 ports.
    assert "64 cabled, 64 free" in text
    assert 'id="port-swp1"' in text and ">gpu001</a>:ens1np0" in text
    assert 'id="port-swp33"' in text and ">spine-a1</a>:swp1" in text
    assert text.index('id="port-swp2"') < text.index('id="port-swp10"')  # ports in number order


def test_a_link_down_shows_on_the_switch_page(browser_as, viewer, demo_cluster):
    Nic.objects.filter(node__hostname="gpu001", name="ens1np0").update(link_up=False)
    leaf = Switch.objects.get(name="leaf-r01-a")
    text = browser_as(viewer).get(f"/switches/{leaf.public_id}/").content.decode()
    assert "1 link down" in text


def test_the_trace_runs_from_the_gpus_through_the_leaf_to_every_spine(browser_as, viewer, demo_cluster):
    node = Node.objects.get(hostname="gpu003")
    client = browser_as(viewer)
    text = client.get(f"/nodes/{node.public_id}/nics/ens1np0/trace/").content.decode()
    assert "leaf-r01-a</a> port <span" in text and "swp9" in text
    assert "spine-a1" in text and "spine-a2" in text and "6.4 Tb/s" in text  # 16 × 400 Gb/s to each spine

    nic = Nic.objects.get(node=node, name="ens1np0")
    trace = client.get(f"/api/nics/{nic.public_id}/trace/").json()
    assert trace["switch"] == "leaf-r01-a" and trace["port"] == "swp9"
    assert [(group["to"], group["count"], group["gbps"]) for group in trace["uplinks"]] == [
        ("spine-a1", 16, 6400),
        ("spine-a2", 16, 6400),
    ]
    assert trace["gpus"] == sorted(gpu.index for gpu in nic.peer_gpus.all()) and trace["problems"] == []


def test_the_trace_names_the_gaps(browser_as, viewer, demo_cluster):
    node = Node.objects.get(hostname="gpu004")
    Cable.objects.filter(a_switch__name="leaf-r01-b").delete()  # the rack's plane-B leaf loses its uplinks
    Cable.objects.filter(a_nic__node=node, a_nic__name="ens3np0").delete()
    client = browser_as(viewer)
    two = Nic.objects.get(node=node, name="ens2np0")
    assert "has no uplinks" in client.get(f"/api/nics/{two.public_id}/trace/").json()["problems"][0]
    three = Nic.objects.get(node=node, name="ens3np0")
    text = client.get(f"/nodes/{node.public_id}/nics/ens3np0/trace/").content.decode()
    assert "has no cable in the inventory." in text
    assert client.get(f"/api/nics/{three.public_id}/trace/").json()["cable"] is None


def test_switch_ports_over_the_api(browser_as, viewer, demo_cluster):
    spine = Switch.objects.get(name="spine-b2")
    ports = browser_as(viewer).get(f"/api/switches/{spine.public_id}/ports/").json()
    assert ports["used"] == 64 and ports["free"] == 64 and ports["down"] == 0
    assert {row["far"]["switch"] for row in ports["rows"]} == {f"leaf-r0{r}-b" for r in range(1, 5)}


def test_the_switch_list_counts_cabled_ports(browser_as, viewer, demo_cluster):
    text = browser_as(viewer).get("/switches/").content.decode()
    assert "leaf-r01-a</a>" in text and "64 of 128" in text


def test_a_link_speed_is_said_one_way(browser_as, viewer, demo_cluster):
    """A port speed is in gigabits: the switch list's column says its unit and its cells are numbers; elsewhere a
    speed reads "400 Gb/s". Cells read "400G" under a header in Gb/s."""
    import re

    client = browser_as(viewer)
    switches = client.get("/switches/").content.decode()
    assert "Port speed (Gb/s)" in switches and "400G" not in switches
    assert re.search(r"<td>64 of 128</td><td>400</td>", switches)
    leaf = Switch.objects.get(name="leaf-r01-a")
    ports = client.get(f"/switches/{leaf.public_id}/").content.decode()
    assert "128 ports at 400 Gb/s" in ports and "<td>400 Gb/s</td>" in ports and "400G" not in ports
    node = Node.objects.get(hostname="gpu001")
    assert "<td>400 Gb/s</td>" in client.get(f"/nodes/{node.public_id}/").content.decode()
    rack = node.rack
    assert "400G" not in client.get(f"/racks/{rack.public_id}/").content.decode()
    trace = client.get(f"/nodes/{node.public_id}/nics/ens1np0/trace/").content.decode()
    assert "400 Gb/s" in trace and "400G" not in trace
