"""The switch page shows the benchmarks that crossed each port: a leaf's ports carry the tests of the nodes cabled to
them, a spine's downlinks the tests whose nodes sat under more than one leaf, and a sweep's suspect marks its port."""

import pytest

from apps.inventory.models import Switch

pytestmark = pytest.mark.django_db(transaction=True)


def section(client, name: str) -> str:
    text = client.get(f"/switches/{Switch.objects.get(name=name).public_id}/").content.decode()
    return text[text.index('id="benchmarks-across-ports"') :]


def row(text: str, port: str) -> str:
    start = text.index(f'href="#port-{port}"')
    return text[start : text.index("</tr>", start)]


def test_a_sweep_shows_on_the_ports_it_crossed_with_the_suspect_marked(run_suite, inject, browser_as, viewer):
    inject("gpu013", "degraded_cable", "ens3np0", rate_gbps=200)
    run = run_suite("nccl-sweep", "rack:r01,rack:r02")
    client = browser_as(viewer)

    leaf = section(client, "leaf-r02-a")
    # gpu013 is the 5th node of r02: its ens3np0 (plane A's second NIC) is swp18, and the sweep blamed that port.
    suspect = row(leaf, "swp18")
    assert "gpu013:ens3np0" in suspect and 'class="badge red"' in suspect and "gpu013 ens3np0" in suspect
    assert f"/benchmarks/runs/{run.public_id}/" in suspect
    assert " fail</span>" in suspect
    healthy = row(leaf, "swp1")  # gpu009's first NIC: in the whole-set test, which found the slow half
    assert "gpu009:ens1np0" in healthy and "gpu013" not in healthy
    assert "swp33" not in leaf  # a leaf's uplinks carry no host of their own

    # The first round spans both racks' leaves, so it crossed the spines: each spine's downlink to them shows it.
    spine = section(client, "spine-a1")
    assert "leaf-r01-a" in spine and "leaf-r02-a" in spine
    assert "leaf-r03-a" not in spine  # no node of r03 took part


def test_a_switch_no_benchmark_crossed_says_so(demo_cluster, browser_as, viewer):
    text = section(browser_as(viewer), "leaf-r03-b")
    assert "No multi-node benchmark has crossed this switch yet." in text
