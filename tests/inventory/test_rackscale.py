"""Rack-scale systems in the inventory: a GB200 NVL72 rack imported whole and exported back, and each way of getting
one wrong refused with the object named and nothing saved."""

import json

import pytest

from apps.inventory.catalogue import RACK_SYSTEMS, sync_gpu_skus
from apps.inventory.models import (
    GpuSku,
    LeakSensor,
    Node,
    NvlinkDomain,
    NvlinkPartition,
    NvlinkSwitchTray,
    PowerShelf,
    Rack,
    Site,
)
from apps.inventory.rackscale import domain_problems
from apps.inventory.transfer import ImportRejected, export_inventory, import_inventory

pytestmark = pytest.mark.django_db

NVL72 = RACK_SYSTEMS["GB200 NVL72"]


def nvl72_document(*, rack="nvl01", domain="nvl01", switch_trays=None, extra_nodes=()) -> dict:
    """A whole GB200 NVL72 rack: 18 compute trays (nodes with 4 GPUs), 9 switch trays, 8 power shelves, a loop with
    a leak sensor per compute tray."""
    trays = [
        {
            "hostname": f"{rack}-t{slot:02d}",
            "role": "compute",
            "rack": {"site": "dc1", "name": rack},
            "u_position": 10 + slot if slot <= 9 else 19 + slot,
            "gpu_sku": "GB200",
            "expected_gpu_count": NVL72.gpus_per_tray,
            "nvlink_domain": domain,
            "tray_slot": slot,
        }
        for slot in range(1, NVL72.compute_trays + 1)
    ]
    return {
        "version": 1,
        "sites": [{"slug": "dc1", "name": "DC 1"}],
        "racks": [{"site": "dc1", "name": rack, "u_height": 48, "power_budget_kw": 132}],
        "nvlink_domains": [{"name": domain, "rack": {"site": "dc1", "name": rack}, "system": "GB200 NVL72"}],
        "nodes": trays + list(extra_nodes),
        "gpus": [
            {"node": tray["hostname"], "index": index, "sku": "GB200"}
            for tray in trays
            for index in range(NVL72.gpus_per_tray)
        ],
        "switch_trays": [
            {"name": f"{domain}-sw{slot}", "domain": domain, "slot": slot, "position": 19 + slot}
            for slot in (switch_trays if switch_trays is not None else range(1, NVL72.switch_trays + 1))
        ],
        "power_shelves": [
            {"name": f"{rack}-ps{n}", "rack": {"site": "dc1", "name": rack}, "capacity_w": 33000, "position": n}
            for n in range(1, NVL72.power_shelves + 1)
        ],
        "coolant_loops": [
            {
                "name": f"{rack}-loop",
                "rack": {"site": "dc1", "name": rack},
                "design_flow_lpm": 80,
                "max_supply_c": 40,
                "max_return_c": 55,
                "max_pressure_kpa": 350,
            }
        ],
        "leak_sensors": [
            {"name": f"{tray['hostname']}-leak", "loop": f"{rack}-loop", "node": tray["hostname"]} for tray in trays
        ],
    }


def _sync_skus():
    sync_gpu_skus(GpuSku)


def rejected(document: dict) -> list:
    with pytest.raises(ImportRejected) as caught:
        import_inventory(text=json.dumps(document), fmt="json")
    return caught.value.problems


def test_a_whole_nvl72_rack_imports_and_exports_back():
    _sync_skus()
    import_inventory(text=json.dumps(nvl72_document()), fmt="json")

    domain = NvlinkDomain.objects.get(name="nvl01")
    assert domain.compute_trays.count() == 18 and domain.switch_trays.count() == 9
    assert PowerShelf.objects.filter(rack__name="nvl01").count() == 8
    assert LeakSensor.objects.filter(loop__name="nvl01-loop").count() == 18
    assert domain_problems() == []

    exported = export_inventory(fmt="json")
    document = json.loads(exported)
    assert [row["name"] for row in document["nvlink_domains"]] == ["nvl01"]
    tray = next(row for row in document["nodes"] if row["hostname"] == "nvl01-t05")
    assert (tray["nvlink_domain"], tray["tray_slot"]) == ("nvl01", 5)
    assert len(document["switch_trays"]) == 9 and len(document["leak_sensors"]) == 18
    # The export imports again as it is, changing nothing.
    totals = import_inventory(text=exported, fmt="json").totals
    assert (totals.created, totals.updated) == (0, 0)


def test_a_domain_missing_a_switch_tray_is_refused_naming_the_domain_and_the_slot():
    _sync_skus()
    problems = rejected(nvl72_document(switch_trays=[1, 2, 3, 4, 5, 6, 7, 9]))
    assert [(p.section, p.message) for p in problems] == [
        ("nvlink_domains", "GB200 NVL72 domain 'nvl01' lacks switch tray slot 8.")
    ]
    assert not NvlinkDomain.objects.exists() and not Node.objects.exists()


def test_a_switch_trays_bmc_address_is_imported_and_exported_and_a_bad_one_refused_naming_it():
    _sync_skus()
    document = nvl72_document()
    document["switch_trays"][2]["bmc_address"] = "10.24.0.3"
    import_inventory(text=json.dumps(document), fmt="json")

    assert NvlinkSwitchTray.objects.get(name="nvl01-sw3").bmc_address == "10.24.0.3"
    exported = json.loads(export_inventory(fmt="json"))
    assert next(row for row in exported["switch_trays"] if row["name"] == "nvl01-sw3")["bmc_address"] == "10.24.0.3"

    document["switch_trays"][2]["bmc_address"] = "bmc;reboot"
    problems = rejected(document)
    assert [(p.section, p.field) for p in problems] == [("switch_trays", "bmc_address")]
    assert NvlinkSwitchTray.objects.get(name="nvl01-sw3").bmc_address == "10.24.0.3"


def test_a_tray_outside_its_domains_rack_and_a_slot_past_the_system_are_refused():
    _sync_skus()
    stray = {
        "hostname": "stray-t01",
        "rack": {"site": "dc1", "name": "r02"},
        "gpu_sku": "GB200",
        "nvlink_domain": "nvl01",
        "tray_slot": 19,
    }
    document = nvl72_document(extra_nodes=[stray])
    document["racks"].append({"site": "dc1", "name": "r02", "u_height": 48, "power_budget_kw": 40})
    problems = rejected(document)
    messages = {(p.section, p.field): p.message for p in problems}
    assert messages[("nodes", "tray_slot")] == "A GB200 NVL72 has compute trays 1–18."
    assert not Rack.objects.exists()


def test_a_leak_sensor_without_a_tray_is_refused():
    _sync_skus()
    document = nvl72_document()
    document["leak_sensors"].append({"name": "floor-leak", "loop": "nvl01-loop"})
    problems = rejected(document)
    assert [(p.section, p.field, p.message) for p in problems] == [
        ("leak_sensors", "node", "Leak sensor floor-leak names no tray: give its node or switch tray.")
    ]
    assert not LeakSensor.objects.exists()


def test_a_switch_tray_slot_past_the_system_and_twice_are_refused():
    _sync_skus()
    document = nvl72_document()
    document["switch_trays"].append({"name": "nvl01-sw10", "domain": "nvl01", "slot": 10})
    document["switch_trays"].append({"name": "nvl01-sw1b", "domain": "nvl01", "slot": 1, "position": 40})
    problems = {(p.section, p.field, p.message) for p in rejected(document)}
    assert ("switch_trays", "slot", "A GB200 NVL72 has switch trays 1–9.") in problems
    assert any(section == "switch_trays" and "slot" in message for section, _, message in problems)
    assert not NvlinkSwitchTray.objects.exists()


def test_a_partition_across_domains_is_named():
    _sync_skus()
    import_inventory(text=json.dumps(nvl72_document()), fmt="json")
    import_inventory(text=json.dumps(nvl72_document(rack="nvl02", domain="nvl02")), fmt="json")
    first, second = NvlinkDomain.objects.order_by("name")
    partition = NvlinkPartition.objects.create(name="p1", domain=first, partition_id=1)
    partition.nodes.set(Node.objects.filter(hostname__in=["nvl01-t01", "nvl02-t01"]))
    assert [(p.section, p.name, p.message) for p in domain_problems()] == [
        ("nvlink_partitions", "p1", "NVLink partition 'p1' reaches 'nvl02-t01', outside NVLink domain 'nvl01'.")
    ]
    assert Site.objects.count() == 1 and second.compute_trays.count() == 18


def test_the_rack_page_draws_the_trays_and_shelves_and_says_what_the_domain_lacks(browser_as, viewer):
    _sync_skus()
    import_inventory(text=json.dumps(nvl72_document()), fmt="json")
    rack = Rack.objects.get(name="nvl01")
    client = browser_as(viewer)

    page = client.get(f"/racks/{rack.public_id}/").content.decode()
    assert 'id="rack-scale"' in page and "GB200 NVL72" in page
    assert "18 of 18" in page and "9 of 9" in page and 'id="rack-scale-problems"' not in page
    # Trays are full depth: drawn on the front and the rear elevation.
    assert page.count('class="dev switch-tray') == 2 * 9 and page.count('class="dev power-shelf') == 2 * 8

    NvlinkSwitchTray.objects.get(name="nvl01-sw4").delete()
    page = client.get(f"/racks/{rack.public_id}/").content.decode()
    assert "GB200 NVL72 domain &#x27;nvl01&#x27; lacks switch tray slot 4." in page
