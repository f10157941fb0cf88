"""The topology is recorded when the inventory changes (a TopologyEvaluation row, as NetBox stores a CablePath when
cables change) and the page and the dashboard read the newest record: a saved change is recorded once its transaction
commits, a bulk update by the periodic run's check, and a view evaluates nothing."""

import datetime

import pytest
from django.test import Client
from django.utils import timezone

from apps.core.reads import ReadScope
from apps.inventory.choices import NodeStatus
from apps.inventory.demo import DEMO, load_cluster
from apps.inventory.models import Nic, Node
from apps.topology import services
from apps.topology.charts import COLOURS
from apps.topology.models import TopologyEvaluation
from apps.topology.services import EVALUATIONS_KEPT, RECHECK_S, record_topology, rule_summary
from apps.topology.views import topology_page
from portal.celery import app as celery_app
from tests.topology.helpers import nic

pytestmark = pytest.mark.django_db


@pytest.fixture
def tasks_run_here(monkeypatch):
    """The recording task runs in this process when it is sent (Celery's own test mode), as a worker would run it."""
    monkeypatch.setitem(celery_app.conf, "task_always_eager", True)


def set_status(hostname: str, status: str) -> None:
    node = Node.objects.get(hostname=hostname)
    node.status = status
    node.save()


def compute_marker(figure: dict, hostname: str) -> tuple[str, str]:
    """(colour, hover text) of a node's marker on the map."""
    trace = next(trace for trace in figure["data"] if trace["name"] == "Compute nodes")
    index = next(i for i, text in enumerate(trace["hovertext"]) if text.startswith(f"<b>{hostname}</b>"))
    return trace["marker"]["color"][index], trace["hovertext"][index]


def rule_of(page: dict, name: str):
    return next(presented for presented in page["rules"] if presented.rule.name == name)


def test_saved_changes_are_recorded_once_when_their_transaction_commits(
    db, tasks_run_here, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        load_cluster(DEMO)  # the demo's transaction records it once it commits
    assert TopologyEvaluation.objects.count() == 1

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        set_status("gpu005", NodeStatus.FAILED)
        port = nic("gpu003", "ens2np0")
        port.mtu = 1500
        port.save()

    assert len([callback for callback in callbacks if "topology" in callback.__module__]) == 1  # one a transaction
    assert TopologyEvaluation.objects.count() == 2
    page = topology_page()
    assert rule_of(page, "data-mtu").rule.offending == ["gpu003:ens2np0"]
    assert rule_of(page, "pair-bandwidth").rule.figures["compute_nodes"] == 31
    colour, hover = compute_marker(page["figure"], "gpu005")
    assert colour == COLOURS["red"] and "compute · failed · rack r01" in hover
    assert [rule.name for rule in rule_summary().failing] == ["data-mtu"]


def test_a_view_reads_the_record_and_evaluates_nothing(demo_cluster, monkeypatch, django_assert_max_num_queries):
    record_topology()

    def evaluated(**kwargs):
        raise AssertionError("a view evaluated the topology")

    monkeypatch.setattr(services, "evaluate_topology", evaluated)
    with ReadScope("GET"), django_assert_max_num_queries(1):
        page = topology_page()
    assert [presented.rule.name for presented in page["rules"]][:2] == ["pair-bandwidth", "dual-plane"]
    assert page["summary"].compute_nodes == 32 and page["figure"]["data"]
    assert rule_summary().all_passed

    client = Client()
    client.force_login(demo_user())
    response = client.get("/topology/")
    assert response.status_code == 200 and b"pair-bandwidth" in response.content
    assert TopologyEvaluation.objects.count() == 1  # reads never write


def demo_user():
    from apps.accounts.models import User

    return User.objects.create_user(username="viewer-topology", password="x")


def test_history_is_append_only_and_an_unchanged_inventory_records_nothing(demo_cluster):
    first = record_topology()
    assert record_topology() is None  # nothing moved

    set_status("gpu005", NodeStatus.FAILED)
    second = record_topology()

    assert second is not None and TopologyEvaluation.objects.first() == second
    first.refresh_from_db()
    assert next(row for row in first.rules if row["name"] == "pair-bandwidth")["figures"]["compute_nodes"] == 32
    for number in range(EVALUATIONS_KEPT + 2):
        set_status("gpu006", NodeStatus.FAILED if number % 2 == 0 else NodeStatus.READY)
        record_topology()
    assert TopologyEvaluation.objects.count() == EVALUATIONS_KEPT


def test_a_bulk_update_is_recorded_by_the_periodic_check(demo_cluster):
    recorded = record_topology()
    Nic.objects.filter(node__hostname="gpu003", name="ens2np0").update(mtu=1500)  # no signal, `updated` left alone

    assert record_topology() is None  # the same fingerprint, checked lately
    TopologyEvaluation.objects.filter(pk=recorded.pk).update(
        updated=timezone.now() - datetime.timedelta(seconds=RECHECK_S)
    )
    checked = record_topology()

    assert checked is not None
    assert [rule.name for rule in rule_summary().failing] == ["data-mtu"]


def test_a_check_that_finds_the_same_outcome_appends_nothing(demo_cluster):
    recorded = record_topology()
    old = timezone.now() - datetime.timedelta(seconds=RECHECK_S)
    TopologyEvaluation.objects.filter(pk=recorded.pk).update(updated=old)

    assert record_topology() is None
    recorded.refresh_from_db()
    assert TopologyEvaluation.objects.count() == 1 and recorded.updated > old


def test_before_the_first_record_the_page_evaluates_the_inventory_and_writes_nothing(demo_cluster):
    set_status("gpu005", NodeStatus.FAILED)
    with ReadScope("GET"):
        page = topology_page()
    assert rule_of(page, "pair-bandwidth").rule.figures["compute_nodes"] == 31
    assert not TopologyEvaluation.objects.exists()
