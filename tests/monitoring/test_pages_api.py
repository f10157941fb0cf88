"""The node page's BMC section, the BMC settings form and the /api/bmcs/ endpoint: roles, write-only password."""

import json
import re
from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from apps.core.models import AuditEntry
from apps.monitoring.models import Bmc, BmcReading

PASSWORD = "Pa55-word-xyz"

pytestmark = pytest.mark.django_db


def _page(client, node):
    return client.get(f"/nodes/{node.public_id}/").content.decode()


@pytest.mark.django_db(transaction=True)
def test_node_page_shows_latest_readings_and_the_rack_budget(browser_as, viewer, gpu_node, sim_bmc, poll):
    sim_bmc()
    poll(gpu_node)

    html = _page(browser_as(viewer), gpu_node)

    assert "BMC readings" in html and "Inlet Temp" in html and "FAN1" in html and "DCMI Power" in html
    # The BMC counts GPUs from 1: its 'GPU4 Temp' is the page's GPU 3, and says so.
    assert "<td>GPU4 (BMC, = GPU 3) Temp</td>" in html and "<td>GPU1 (BMC, = GPU 0) Temp</td>" in html
    budget = f"{float(gpu_node.rack.power_budget_kw) * 1000:.0f} W budget"
    assert budget in html and "from 1 node read in the last 10 minutes" in html
    assert "BMC settings</a>" not in html  # a viewer may not edit them
    assert settings.RACKPILOT_SIM_BMC_PASSWORD not in html


def _figure(html: str, key: str) -> dict:
    found = re.search(rf'<script id="{key}" type="application/json">(.*?)</script>', html, re.S)
    return json.loads(found.group(1))


@pytest.mark.django_db(transaction=True)
def test_node_page_charts_the_stored_series_against_the_rack_budget(browser_as, viewer, gpu_node, sim_bmc, poll):
    sim_bmc()
    poll(gpu_node)
    BmcReading.objects.update(time=timezone.now() - timedelta(minutes=5))  # the first poll, five minutes ago
    poll(gpu_node)

    html = _page(browser_as(viewer), gpu_node)

    temperatures = {trace["name"]: trace for trace in _figure(html, "bmc-temperature")["data"]}
    assert len(temperatures["Inlet Temp"]["y"]) == 2 and "GPU4 (BMC, = GPU 3) Temp" in temperatures
    assert len(_figure(html, "bmc-fans")["data"][0]["y"]) == 2
    power, share = _figure(html, "bmc-power")["data"]
    assert len(power["y"]) == 2 and 1000 < power["y"][-1] < 3000
    budget_w = float(gpu_node.rack.power_budget_kw) * 1000
    assert share["y"][0] == pytest.approx(budget_w / gpu_node.rack.nodes.count())


def test_node_without_bmc_says_so(browser_as, viewer, gpu_node):
    assert "No BMC settings" in _page(browser_as(viewer), gpu_node)


def test_form_roles(client, browser_as, viewer, gpu_node):
    url = f"/telemetry/nodes/{gpu_node.public_id}/bmc/"

    assert client.get(url).status_code == 302  # to the login page
    assert browser_as(viewer).get(url).status_code == 403


def test_operator_saves_settings_and_the_password_stays_write_only(browser_as, operator, gpu_node):
    client = browser_as(operator)
    url = f"/telemetry/nodes/{gpu_node.public_id}/bmc/"
    form = {"address": "10.99.0.7", "protocol": "redfish", "port": "8443", "user": "ops", "verify_tls": "on"}

    response = client.post(url, form | {"password": PASSWORD})

    assert response.status_code == 302
    bmc = Bmc.objects.get(node=gpu_node)
    assert (bmc.node.bmc_address, bmc.protocol, bmc.port, bmc.user) == ("10.99.0.7", "redfish", 8443, "ops")
    assert bmc.password() == PASSWORD and PASSWORD not in bmc.password_encrypted
    assert PASSWORD not in client.get(url).content.decode()
    assert PASSWORD not in _page(client, gpu_node)
    client.post(url, form | {"password": ""})  # empty keeps the stored one
    bmc.refresh_from_db()
    assert bmc.password() == PASSWORD
    changes = " ".join(str(entry.changes) for entry in AuditEntry.objects.filter(object_type="monitoring.bmc"))
    assert "password_encrypted" in changes and PASSWORD not in changes and bmc.password_encrypted not in changes


def test_form_refuses_bad_input_and_changes_nothing(browser_as, operator, gpu_node):
    client = browser_as(operator)
    url = f"/telemetry/nodes/{gpu_node.public_id}/bmc/"
    address = gpu_node.bmc_address

    too_long = client.post(url, {"address": "10.0.0.1", "protocol": "ipmi", "user": "ops", "password": "x" * 21})
    shell = client.post(url, {"address": "10.0.0.1; reboot", "protocol": "ipmi", "user": "ops"})

    assert "IPMI 2.0 passwords are at most 20 bytes" in too_long.content.decode()
    assert "Enter a host name" in shell.content.decode()
    assert not Bmc.objects.exists()
    gpu_node.refresh_from_db()
    assert gpu_node.bmc_address == address


def test_api_roles_and_write_only_password(api_client, api_as, viewer, operator, gpu_node):
    body = {"node": "gpu001", "address": "10.99.0.8", "protocol": "ipmi", "user": "ops", "password": PASSWORD}

    assert api_client.get("/api/bmcs/").status_code in (401, 403)
    assert api_as(viewer).post("/api/bmcs/", body, format="json").status_code == 403
    created = api_as(operator).post("/api/bmcs/", body, format="json")

    assert created.status_code == 201, created.content
    assert created.json()["has_password"] is True and "password" not in created.json()
    listed = api_as(viewer).get("/api/bmcs/").json()["results"]
    assert [row["address"] for row in listed] == ["10.99.0.8"] and PASSWORD not in str(listed)
    public_id = created.json()["id"]
    changed = api_as(operator).patch(f"/api/bmcs/{public_id}/", {"port": 6230}, format="json")
    assert changed.status_code == 200 and changed.json()["port"] == 6230
    assert Bmc.objects.get().password() == PASSWORD


def test_api_bad_input_names_the_field(api_as, operator, gpu_node):
    client = api_as(operator)
    base = {"node": "gpu001", "address": "10.99.0.8", "protocol": "ipmi", "user": "ops"}

    assert "password" in client.post("/api/bmcs/", base | {"password": "p" * 30}, format="json").json()
    assert "user" in client.post("/api/bmcs/", base | {"user": "a b"}, format="json").json()
    assert "port" in client.post("/api/bmcs/", base | {"port": 70000}, format="json").json()
    assert "node" in client.post("/api/bmcs/", base | {"node": "no-such-node"}, format="json").json()
    assert not Bmc.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_api_latest_readings(api_as, viewer, gpu_node, sim_bmc, poll):
    bmc = sim_bmc()
    poll(gpu_node)

    rows = api_as(viewer).get(f"/api/bmcs/{bmc.public_id}/readings/").json()

    sensors = {row["sensor"]: row for row in rows}
    assert sensors["Inlet Temp"]["unit"] == "C" and sensors["DCMI Power"]["kind"] == "power"
