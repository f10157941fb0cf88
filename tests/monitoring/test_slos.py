"""SLOs as data: refused when they do not fit their objective, evaluated over 1 h / 24 h / 7 d from the telemetry
(the simulator here), moved by a fault, and listed with the nodes that drag them."""

import datetime as dt

import pytest
import yaml
from django.core.exceptions import ValidationError
from django.utils import timezone

from apps.inventory.demo import ClusterShape, load_cluster
from apps.inventory.models import Node
from apps.monitoring import services
from apps.monitoring.models import Slo
from apps.monitoring.telemetry import SimulatorTelemetry, TelemetryError
from apps.simulator import services as simulator
from apps.simulator.models import SimFault
from apps.workloads.models import InferenceService
from tests.monitoring.demand import seed_where_demand_is

pytestmark = pytest.mark.django_db


@pytest.fixture
def chat(db):
    load_cluster(ClusterShape(compute_nodes=2, nodes_per_rack=2, management_nodes=0))
    service = InferenceService.objects.create(
        name="chat", model="m", design_tokens_per_second=4000, latency_target_ms=100
    )
    service.nodes.set(Node.objects.all())
    two_hours_ago = timezone.now() - dt.timedelta(hours=2)
    InferenceService.objects.update(created=two_hours_ago)
    Node.objects.update(created=two_hours_ago - dt.timedelta(hours=1))
    return InferenceService.objects.get()


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"objective": "energy_per_mtok", "scope": "cluster", "target": 0.5}, "scope"),
        ({"objective": "latency_p99", "scope": "service", "target": 0}, "target"),
        ({"objective": "throughput", "scope": "service", "target": 90}, "service"),
        ({"objective": "gpu_utilisation", "scope": "cluster", "target": 85, "compliance": 1.0}, "compliance"),
    ],
)
def test_an_slo_that_does_not_fit_its_objective_names_the_field(fields, field):
    with pytest.raises(ValidationError) as error:
        Slo(name="x", **fields).full_clean()
    assert field in error.value.message_dict


def test_the_budget_is_judged_over_each_window_and_a_power_cap_moves_throughput(chat, settings, record_telemetry):
    # At the peak of the demand wave the cap takes tokens/s away; at its trough (30 % of design) the capped nodes
    # still met the demand, and a run at that hour saw the same tokens/s.
    now = timezone.now().timestamp() // 60 * 60  # the clock this test reads its telemetry at
    settings.RACKPILOT_SIM_SEED = seed_where_demand_is("peak", chat.name, at=now)
    slo = Slo.objects.create(name="chat-throughput", objective="throughput", scope="service", service=chat, target=90)
    record_telemetry(now)
    healthy = services.slo_status(slo, end=now)
    for node in Node.objects.all():
        simulator.inject_fault(node=node, kind="power_cap", target="", parameters={"watts": 150})
    SimFault.objects.update(created=timezone.now() - dt.timedelta(minutes=30))  # capped for the last half hour
    record_telemetry(now + 600)  # ten minutes on: recorded with the cap
    capped = services.slo_status(slo, end=now + 600)
    before = services.slo_status(slo, end=now)

    assert not healthy["error"] and [b.window for b in healthy["budgets"]] == ["1h", "24h", "7d", "30d"]
    hour = healthy["budgets"][0]
    assert hour.judged > 0 and hour.compliance is not None
    assert capped["latest"] < healthy["latest"]  # fewer tokens/s under the cap
    # What was recorded before the cap stays as recorded: its hour, and its latest value.
    assert before["budgets"][0].good == hour.good and before["latest"] == healthy["latest"]


@pytest.mark.usefixtures("clock")  # first: the service and its nodes are stamped at the test's moment
def test_the_slos_listed_together_are_each_as_alone_and_one_unreadable_leaves_the_others(clock, chat, record_telemetry):
    class TokensUnreadable(SimulatorTelemetry):
        def tokens_per_second(self, *, service, window):
            raise TelemetryError(f"no tokens/s of {service}")

    now = clock.now.timestamp() // 60 * 60
    throughput = Slo.objects.create(
        name="a-throughput", objective="throughput", scope="service", service=chat, target=90
    )
    utilisation = Slo.objects.create(name="b-util", objective="gpu_utilisation", scope="cluster", target=50)
    record_telemetry(now)

    together = services.slo_statuses([throughput, utilisation], end=now)
    alone = [services.slo_status(row, end=now) for row in (throughput, utilisation)]
    assert [s["budgets"] for s in together] == [s["budgets"] for s in alone]
    assert [s["latest"] for s in together] == [s["latest"] for s in alone] and together[0]["latest"] is not None
    assert [[d["node"] for d in s["draggers"]] for s in together] == [[d["node"] for d in s["draggers"]] for s in alone]
    assert not any(s["error"] for s in together) and all(s["draggers"] for s in together)

    # A service's SLOs drag alike: their blame is asked once, and each lists it.
    class Counting(SimulatorTelemetry):
        asked = 0

        def gpu_means(self, fields, *, hostnames, window):
            Counting.asked += 1
            return super().gpu_means(fields, hostnames=hostnames, window=window)

    latency = Slo.objects.create(name="c-p99", objective="latency_p99", scope="service", service=chat, target=500)
    three = services.slo_statuses([throughput, utilisation, latency], source=Counting(), windows=("1h",), end=now)
    assert Counting.asked == 2  # the service's nodes, the cluster's
    assert [d["node"] for d in three[2]["draggers"]] == [d["node"] for d in three[0]["draggers"]]
    assert [d["drag_unit"] for d in three[2]["draggers"]] == ["tokens/s"] * len(three[2]["draggers"])

    # The throughput's blame asks its tokens/s: unreadable, its error shows; the utilisation's status is whole.
    failing, whole = services.slo_statuses([throughput, utilisation], source=TokensUnreadable(), end=now)
    assert failing["error"] == "no tokens/s of chat" and not failing["draggers"]
    assert not whole["error"] and whole["budgets"] == alone[1]["budgets"] and whole["draggers"]


def test_the_api_defines_slos_for_operators_and_shows_their_status(api_as, operator, viewer, chat, record_telemetry):
    payload = {"name": "chat-p99", "objective": "latency_p99", "scope": "service", "service": "chat", "target": 100}

    assert api_as(viewer).post("/api/slos/", payload, format="json").status_code == 403
    bad = api_as(operator).post("/api/slos/", {**payload, "service": None}, format="json")
    assert bad.status_code == 400 and "service" in bad.json() and not Slo.objects.exists()
    unknown = api_as(operator).post("/api/slos/", {**payload, "service": "nope", "rack": "r1"}, format="json").json()
    assert unknown["service"] == ["No inference service matches 'nope'."]  # as every reference says it
    assert unknown["rack"] == ["No rack matches 'r1'."] and not Slo.objects.exists()
    created = api_as(operator).post("/api/slos/", payload, format="json")
    assert created.status_code == 201, created.json()
    record_telemetry()

    status = api_as(viewer).get(f"/api/slos/{created.json()['id']}/status/").json()
    assert [b["window"] for b in status["budgets"]] == ["1h", "24h", "7d", "30d"]
    assert status["draggers"] and status["draggers"][0]["node"].startswith("gpu")


def test_the_page_lists_slos_and_the_rules_download_is_prometheus_rules(browser_as, operator, viewer, chat):
    Slo.objects.create(name="chat-util", objective="gpu_utilisation", scope="service", service=chat, target=85)
    page = browser_as(viewer).get("/telemetry/slos/").content.decode()
    rules = yaml.safe_load(browser_as(viewer).get("/telemetry/slos/rules.yml").content)

    assert 'data-slo="chat-util"' in page and "New SLO" not in page  # viewers read only
    assert {rule.get("record") for rule in rules["groups"][0]["rules"]} >= {"rackpilot:slo_good"}
    names = [group["name"] for group in rules["groups"]]
    assert names[-3:] == ["rackpilot-telemetry-recording", "rackpilot-gpu-faults", "rackpilot-telemetry-recording-5m"]
    refused = browser_as(operator).post(
        "/telemetry/slos/",
        {"name": "e", "objective": "energy_per_mtok", "scope": "rack", "target": "0.5", "compliance": "0.99"},
    )
    assert refused.status_code == 200 and "is measured for" in refused.content.decode()
    assert Slo.objects.count() == 1
    form = browser_as(operator).get("/telemetry/slos/").content.decode()
    assert "Choose an objective" in form and "No training job" in form and "---------" not in form

    # The rack is typed by name, offered in a datalist (a fleet has hundreds): an unknown name is a form error.
    assert '<option value="r01"></datalist>' in form
    rack = {"name": "r-util", "objective": "gpu_utilisation", "scope": "rack", "target": "80", "compliance": "0.99"}
    unknown = browser_as(operator).post("/telemetry/slos/", {**rack, "rack": "r99"}).content.decode()
    assert "No rack of that name." in unknown and Slo.objects.count() == 1
    assert browser_as(operator).post("/telemetry/slos/", {**rack, "rack": "r01"}).status_code == 302
    assert Slo.objects.get(name="r-util").rack.name == "r01"
