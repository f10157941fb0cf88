"""Job templates: a kind with saved parameters (checked by the kind) and targets, owned, audited, started from the
page or the API; viewers read only."""

import pytest
from django.urls import reverse

from apps.automation.models import JobTemplate, TemplateRun
from apps.core.models import AuditEntry
from apps.jobs.models import Job

pytestmark = pytest.mark.django_db

URL = "/api/job-templates/"
BODY = {"name": "nightly sleep", "kind": "sleep", "parameters": {"seconds": 1}, "targets": {"racks": ["r04"]}}


def test_an_operator_saves_a_template_and_starts_its_job_over_the_api(api_as, operator, rack_of_nodes):
    client = api_as(operator)
    answer = client.post(URL, BODY, format="json")
    assert answer.status_code == 201, answer.content
    template = JobTemplate.objects.get(name="nightly sleep")
    assert template.owner == operator and template.parameters == {"seconds": 1.0, "steps": 1}
    assert AuditEntry.objects.filter(object_type="automation.jobtemplate", action="create", actor=operator).exists()

    started = client.post(f"{URL}{template.public_id}/run/")

    assert started.status_code == 201
    assert started.json()["url"] == f"http://testserver/api/jobs/{started.json()['id']}/"
    job = Job.objects.get(public_id=started.json()["id"])
    assert job.kind == "sleep" and job.parameters == {"seconds": 1.0, "steps": 1} and job.node_count == 3
    assert job.requested_by == operator
    run = TemplateRun.objects.get(template=template)
    assert run.job == job and run.schedule is None
    assert "started from job template “nightly sleep”" in " ".join(job.events.values_list("message", flat=True))
    assert AuditEntry.objects.filter(object_type="automation.jobtemplate", action="start", job=job.public_id).exists()
    runs = client.get(f"{URL}{template.public_id}/runs/").json()
    assert runs["results"][0]["job"] == str(job.public_id)


def test_bad_parameters_and_targets_are_refused_naming_the_field(api_as, operator, rack_of_nodes):
    client = api_as(operator)
    answer = client.post(URL, {**BODY, "parameters": {"seconds": -1, "nope": 1}}, format="json")
    assert answer.status_code == 400
    assert "seconds" in answer.json()["parameters"]
    unknown = client.post(URL, {**BODY, "parameters": {"nope": 1}}, format="json")
    assert unknown.status_code == 400 and "nope" in unknown.json()["parameters"]
    no_rack = client.post(URL, {**BODY, "targets": {"racks": ["r99"]}}, format="json")
    assert no_rack.status_code == 400 and "r99" in str(no_rack.json()["targets"])
    both = client.post(URL, {**BODY, "parameters": {"seconds": -1}, "targets": {"racks": ["r99"]}}, format="json")
    assert both.status_code == 400 and {"parameters", "targets"} <= set(both.json())  # every bad field at once
    assert not JobTemplate.objects.exists()


def test_viewers_read_and_only_the_owner_or_an_admin_changes(api_as, viewer, operator, admin, make_user):
    from tests.factories import make_node

    make_node(hostname="gpu001")
    body = {**BODY, "targets": {"nodes": ["gpu001"]}}
    assert api_as(viewer).post(URL, body, format="json").status_code == 403
    created = api_as(operator).post(URL, body, format="json").json()
    assert api_as(viewer).get(URL).json()["results"][0]["name"] == "nightly sleep"
    assert api_as(viewer).post(f"{URL}{created['id']}/run/").status_code == 403
    other = make_user("operator", "other-operator")
    assert api_as(other).patch(f"{URL}{created['id']}/", {"description": "x"}, format="json").status_code == 403
    assert api_as(other).post(f"{URL}{created['id']}/run/").status_code == 201  # any operator may start it
    changed = api_as(admin).patch(f"{URL}{created['id']}/", {"parameters": {"seconds": 2}}, format="json")
    assert changed.status_code == 200 and changed.json()["parameters"] == {"seconds": 2.0, "steps": 1}
    entry = AuditEntry.objects.filter(object_type="automation.jobtemplate", action="update").get()
    assert entry.actor == admin and "parameters" in entry.changes
    assert api_as(admin).get(f"{URL}?nosuch=1").status_code == 400


def test_the_page_starts_a_job_and_viewers_see_no_buttons(browser_as, viewer, operator, rack_of_nodes):
    page = browser_as(operator)
    answer = page.post(
        reverse("automation-template-new"),
        {"name": "burn", "kind": "sleep", "racks": ["r04"], "parameters": '{"seconds": 0}', "role": ""},
    )
    assert answer.status_code == 302, answer.content.decode()[:2000]
    template = JobTemplate.objects.get(name="burn")
    bad = page.post(
        reverse("automation-template-new"),
        {"name": "bad", "kind": "sleep", "racks": ["r04"], "parameters": '{"seconds": "x"}'},
    )
    assert bad.status_code == 400 and "seconds" in bad.content.decode()
    started = page.post(reverse("automation-template-run", args=[template.public_id]))
    job = Job.objects.get()
    assert started.status_code == 302 and started["Location"] == reverse("job-page", args=[job.public_id])

    seen = browser_as(viewer).get(reverse("automation-template", args=[template.public_id])).content.decode()
    assert "burn" in seen and job.kind in seen and 'id="run-template"' not in seen
    # Its parameters and targets in words, not Python's repr of a dict ("{'seconds': 0}").
    assert '<span class="mono" id="parameters">steps: 1; seconds: 0.0</span>' in seen and "{&#x27;" not in seen
    assert '<span class="mono" id="targets">racks: r04</span>' in seen
    assert browser_as(viewer).post(reverse("automation-template-run", args=[template.public_id])).status_code == 403
    assert Job.objects.count() == 1


def test_every_bad_field_of_a_template_is_named_at_once(api_as, browser_as, operator, rack_of_nodes):
    """Fields refused by their shape (a name too long, a transport, a role) no longer hide what the template's checks
    say of the others (parameters the kind refuses, a rack of no such name, a name taken)."""
    client = api_as(operator)
    body = {
        **BODY,
        "name": "n" * 101,
        "transport": "telnet",
        "parameters": {"seconds": -1},
        "targets": {"racks": ["r99"]},
    }
    answer = client.post(URL, body, format="json")
    assert answer.status_code == 400
    assert set(answer.json()) == {"name", "transport", "parameters", "targets"}, answer.json()
    assert client.post(URL, BODY, format="json").status_code == 201
    taken = client.post(URL, {**BODY, "transport": "telnet"}, format="json")
    assert taken.status_code == 400 and set(taken.json()) == {"name", "transport"}, taken.json()
    assert "exists" in str(taken.json()["name"])

    page = browser_as(operator)
    form = {"name": BODY["name"], "kind": "sleep", "racks": ["r04"], "role": "bogus", "parameters": '{"seconds": -1}'}
    shown = page.post(reverse("automation-template-new"), form)
    assert shown.status_code == 400
    assert set(shown.context["form"].errors) == {"name", "role", "parameters"}, shown.context["form"].errors
    assert JobTemplate.objects.count() == 1


def test_a_templates_and_a_schedules_url_is_their_api_address_and_page_their_page(api_as, operator, rack_of_nodes):
    """`url` was the page's relative path, where every other object's `url` is its absolute API address."""
    client = api_as(operator)
    template = client.post(URL, BODY, format="json").json()
    schedule = client.post(
        "/api/schedules/",
        {"name": "nightly", "template": template["id"], "timing": "interval", "every_minutes": 60},
        format="json",
    ).json()
    for answer, api, page in (
        (template, "/api/job-templates/", "automation-template"),
        (schedule, "/api/schedules/", "automation-schedule"),
    ):
        assert answer["url"] == f"http://testserver{api}{answer['id']}/"
        assert answer["page"] == f"http://testserver{reverse(page, args=[answer['id']])}"
        assert client.get(answer["url"]).json()["id"] == answer["id"]
