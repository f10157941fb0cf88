"""The jobs REST API: who may do what, validation that names the field, and the shapes automation relies on."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.jobs.choices import JobStatus, StepStatus
from apps.jobs.events import append_events
from apps.jobs.models import Job, JobStep
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def nodes(db):
    return [factories.make_node(hostname=f"n{i:02d}") for i in range(3)]


def _post(client, **body):
    body.setdefault("kind", "sleep")
    body.setdefault("targets", {"nodes": ["n00", "n01"]})
    body.setdefault("transport", "local")
    return client.post("/api/jobs/", body, format="json")


def test_anonymous_gets_401(api_client, nodes):
    assert api_client.get("/api/jobs/").status_code == 401
    assert _post(api_client).status_code == 401


def test_viewer_reads_but_cannot_start_or_cancel(api_as, viewer, operator, nodes):
    job = _post(api_as(operator)).json()
    client = api_as(viewer)
    assert client.get("/api/jobs/").status_code == 200
    assert client.get(f"/api/jobs/{job['id']}/").status_code == 200
    assert _post(client).status_code == 403
    assert client.post(f"/api/jobs/{job['id']}/cancel/").status_code == 403
    assert Job.objects.count() == 1


def test_operator_starts_a_job_and_it_is_enqueued(
    api_as, operator, nodes, no_celery, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        response = _post(
            api_as(operator), parameters={"seconds": 2, "steps": 2}, targets={"nodes": ["n00", str(nodes[1].public_id)]}
        )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["status"] == "queued" and body["kind"] == "sleep" and body["node_count"] == 2
    assert body["parameters"] == {"seconds": 2.0, "steps": 2}
    assert body["progress"] == {"total": 4, "done": 0, "percent": 0}
    assert body["requested_by"] == "operator"
    job = Job.objects.get(public_id=body["id"])
    assert sorted(JobStep.objects.filter(job=job).values_list("hostname", "step")) == [
        ("n00", "sleep-1"),
        ("n00", "sleep-2"),
        ("n01", "sleep-1"),
        ("n01", "sleep-2"),
    ]
    assert [str(x) for x in no_celery] == [body["id"]]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"parameters": {"seconds": -1}}, "seconds"),
        ({"parameters": {"seconds": "soon"}}, "seconds"),
        ({"parameters": {"steps": 0}}, "steps"),
        ({"parameters": {"bogus": 1}}, "bogus"),
        ({"kind": "shell-check", "parameters": {"commands": ["rm -rf /"]}}, "commands"),
        ({"kind": "shell-check", "parameters": {"interface": "eth0; reboot"}}, "interface"),
    ],
)
def test_bad_parameters_answer_400_naming_the_field_and_create_nothing(api_as, operator, nodes, body, field):
    response = _post(api_as(operator), **body)
    assert response.status_code == 400
    assert field in response.json()["parameters"]
    assert Job.objects.count() == 0


def test_unknown_kind_transport_or_nodes_are_400(api_as, operator, nodes):
    client = api_as(operator)
    assert "kind" in _post(client, kind="format-disks").json()
    assert "transport" in _post(client, transport="telnet").json()
    response = _post(client, targets={"nodes": ["n00", "nope"]})
    assert response.status_code == 400 and "nope" in str(response.json()["targets"])
    assert _post(client, targets={}).status_code == 400
    assert Job.objects.count() == 0


def test_a_transport_this_install_does_not_allow_is_400(api_as, operator, nodes, settings):
    settings.RACKPILOT_JOB_TRANSPORTS = ["ssh", "sim"]
    response = _post(api_as(operator), transport="local")
    assert response.status_code == 400
    assert "does not allow the local transport" in response.json()["transport"][0]
    assert Job.objects.count() == 0


def test_targets_by_rack_and_tag(api_as, operator, db):
    rack = factories.make_rack(name="r1")
    from apps.inventory.models import Tag

    tag = Tag.objects.create(name="Pool A", slug="pool-a")
    in_rack = [factories.make_node(hostname=f"r{i}", rack=rack, u_position=1 + 2 * i) for i in range(2)]
    tagged = factories.make_node(hostname="t1")
    tagged.tags.add(tag)
    factories.make_node(hostname="other")
    response = _post(api_as(operator), targets={"racks": ["r1"], "tags": ["pool-a"]})
    assert response.status_code == 201, response.json()
    job = Job.objects.get(public_id=response.json()["id"])
    assert sorted(job.nodes.values_list("hostname", flat=True)) == sorted([n.hostname for n in in_rack] + ["t1"])


def test_events_after_seq_and_steps(api_as, operator, nodes):
    client = api_as(operator)
    job_id = _post(client).json()["id"]
    job = Job.objects.get(public_id=job_id)
    append_events(job.pk, [{"message": f"line {i}", "hostname": "n00"} for i in range(10)])
    page = client.get(f"/api/jobs/{job_id}/events/?after=5").json()
    assert [e["seq"] for e in page["events"]] == list(range(6, 12))  # seq 1 is the "requested by" event
    assert page["last_seq"] == 11 and page["more"] is False
    limited = client.get(f"/api/jobs/{job_id}/events/?after=0&limit=3").json()
    assert [e["seq"] for e in limited["events"]] == [1, 2, 3] and limited["more"] is True
    steps = client.get(f"/api/jobs/{job_id}/steps/").json()
    assert steps["count"] == 2 and {s["status"] for s in steps["results"]} == {StepStatus.PENDING}


def test_list_query_count_does_not_grow_with_jobs(api_as, operator, nodes):
    client = api_as(operator)
    for _ in range(2):
        _post(client)
    with CaptureQueriesContext(connection) as few:
        client.get("/api/jobs/")
    for _ in range(5):
        _post(client)
    with CaptureQueriesContext(connection) as many:
        assert len(client.get("/api/jobs/").json()["results"]) == 7
    assert len(many) == len(few)


def test_cancel_a_queued_job(api_as, operator, nodes):
    client = api_as(operator)
    job_id = _post(client).json()["id"]
    body = client.post(f"/api/jobs/{job_id}/cancel/").json()
    assert body["status"] == JobStatus.CANCELED and body["cancel_requested"] is True
    assert set(JobStep.objects.filter(job__public_id=job_id).values_list("status", flat=True)) == {StepStatus.CANCELED}


def test_schema_generates_without_warnings(capsys):
    from django.core.management import call_command

    call_command("spectacular", "--fail-on-warn", "--validate", "--file", "/dev/null")
    assert "jobs" not in capsys.readouterr().err


def test_the_list_page_and_the_api_filter_jobs_alike(api_as, browser_as, operator, nodes):
    client = api_as(operator)
    canceled = _post(client).json()["id"]
    client.post(f"/api/jobs/{canceled}/cancel/")
    queued = _post(client, kind="shell-check", parameters={"commands": ["uname"]}).json()["id"]
    page = browser_as(operator)
    for query, expected in (
        ("status=canceled", {canceled}),
        ("status=queued", {queued}),
        ("kind=shell-check", {queued}),
        ("status=canceled&kind=shell-check", set()),
        ("status=nonsense", set()),  # the page names the refused value and lists nothing, as the API refuses it
    ):
        shown = page.get(f"/jobs/?{query}").content.decode()
        assert {job_id for job_id in (canceled, queued) if f"/jobs/{job_id}/" in shown} == expected, query
        if query != "status=nonsense":  # the API answers 400 naming the field (below)
            listed = {job["id"] for job in client.get(f"/api/jobs/?{query}").json()["results"]}
            assert listed == expected, query
    assert client.get("/api/jobs/?status=nonsense").status_code == 400


@pytest.mark.parametrize("transport", ["local", "telnet"])
def test_every_bad_field_of_a_job_request_is_named_at_once(api_as, operator, nodes, settings, transport):
    """`local` is refused by the job's own checks (this install allows ssh and sim); `telnet` by its shape, before
    those checks run: they still speak for the fields that passed (an unknown node, a negative duration)."""
    settings.RACKPILOT_JOB_TRANSPORTS = ["ssh", "sim"]
    body = {"kind": "sleep", "targets": {"nodes": ["no-such-node"]}, "parameters": {"seconds": -5}}
    response = api_as(operator).post("/api/jobs/", {**body, "transport": transport}, format="json")

    assert response.status_code == 400
    assert set(response.data) == {"targets", "parameters", "transport"}, response.data
    assert "no-such-node" in str(response.data["targets"]) and "seconds" in response.data["parameters"]
    assert Job.objects.count() == 0


def test_the_new_job_page_names_every_bad_field_at_once(browser_as, operator, nodes):
    page = browser_as(operator).post("/jobs/new/", {"kind": "sleep", "parameters": '{"seconds": -5}'})

    assert page.status_code == 200
    errors = page.context["form"].errors
    assert "__all__" in errors and "parameters" in errors, errors  # no targets, and the bad duration
    assert Job.objects.count() == 0


def test_a_jobs_url_is_its_api_address_as_every_objects_is_and_its_page_is_beside_it(api_as, operator, nodes):
    """`url` was the page's relative path (/jobs/<id>/) where a node's, a rack's ... is the absolute API address."""
    client = api_as(operator)
    started = _post(client).json()
    job_id = started["id"]
    api, page = f"http://testserver/api/jobs/{job_id}/", f"http://testserver/jobs/{job_id}/"
    listed = client.get("/api/jobs/").json()["results"][0]
    detail = client.get(f"/api/jobs/{job_id}/").json()
    cancelled = client.post(f"/api/jobs/{job_id}/cancel/").json()
    for answer in (started, listed, detail, cancelled):
        assert (answer["url"], answer["page"]) == (api, page)
    assert client.get(detail["url"]).json()["id"] == job_id
