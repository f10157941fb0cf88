"""Every action is in the audit log — job starts and cancels, approvals, logins and failed logins, API tokens —
shown as readable diffs, filtered by object, user, source and time, and exported as CSV or JSON."""

import json

import pytest
from django.urls import reverse

from apps.core import audit
from apps.core.choices import AuditAction, ChangeSource
from apps.core.models import AuditEntry
from apps.inventory.choices import NodeStatus
from apps.jobs import services as job_services
from apps.tokens import services as token_services
from apps.tokens.models import ApiToken
from tests.factories import make_node, make_rack, make_token

pytestmark = pytest.mark.django_db


def test_starting_and_cancelling_a_job_are_recorded_with_a_link_to_it(operator, demo_cluster):
    job = job_services.create_job(
        kind="sleep",
        targets=job_services.TargetSpec(nodes=("gpu017",)),
        parameters={"seconds": 1},
        transport="sim",
        requested_by=operator,
        queue=False,
    )
    job_services.cancel_job(job=job, user=operator)
    job_services.cancel_job(job=job, user=operator)  # already over: nothing more to record

    entries = AuditEntry.objects.filter(job=job.public_id).order_by("id")
    assert [(e.action, e.actor_name) for e in entries] == [
        (AuditAction.START, "operator"),
        (AuditAction.CANCEL, "operator"),
    ]
    assert entries[0].changes["kind"] == [None, "sleep"]


def test_changes_made_by_a_job_name_it(operator):
    node = make_node()
    job_id = "6f1c1a52-5d2b-4d7e-9a43-1f1b5e0f4b21"
    with audit.audit_context(source=ChangeSource.JOB, user=operator, job=job_id):
        node.status = NodeStatus.READY
        node.save()

    entry = AuditEntry.objects.for_object(node).first()
    assert (entry.source, str(entry.job), entry.actor_name) == ("job", job_id, "operator")


def test_diffs_read_as_names_and_labels_not_ids(operator):
    old, new = make_rack(name="r01"), make_rack(name="r02")
    node = make_node(rack=old, status=NodeStatus.PLANNED)
    node.rack, node.status = new, NodeStatus.READY
    node.save()

    entry = audit.attach_change_rows([AuditEntry.objects.for_object(node).first()])[0]

    rows = {row.field: (row.before, row.after) for row in entry.rows}
    assert rows["rack"] == ("r01", "r02")
    assert rows["status"] == (NodeStatus.PLANNED.label, NodeStatus.READY.label)


def test_logins_failed_logins_and_tokens_are_recorded_without_secrets(client, operator):
    operator.set_password("correct-horse-battery")
    operator.save()
    assert not client.login(username="operator", password="wrong-password-123")
    assert client.login(username="operator", password="correct-horse-battery")
    key = make_token(operator, name="ci")
    token_services.revoke_token(token=ApiToken.objects.get(user=operator), by=operator)

    actions = list(AuditEntry.objects.order_by("id").values_list("action", "object_repr"))
    assert (AuditAction.LOGIN_FAILED, "login as 'operator'") in actions
    assert (AuditAction.LOGIN, "operator") in actions
    prefix = key[: token_services.PREFIX_LENGTH]
    assert (AuditAction.CREATE, f"API token {prefix}… 'ci' of operator") in actions
    assert (AuditAction.DELETE, f"API token {prefix}… 'ci' of operator") in actions
    dumped = json.dumps(list(AuditEntry.objects.values()), default=str)
    assert "wrong-password-123" not in dumped and key not in dumped


def test_the_log_filters_by_object_user_source_and_time(browser_as, operator, viewer):
    node = make_node(hostname="gpu900")
    with audit.audit_context(source=ChangeSource.API, user=operator):
        node.comments = "moved"
        node.save()
    page = browser_as(viewer)

    def shown(**query):
        return page.get(reverse("audit-log"), query).content.decode()

    assert "gpu900" in shown(object="gpu9", actor="operator", source="api")
    assert "gpu900" not in shown(object="gpu9", source="import")
    assert "gpu900" not in shown(object="gpu9", since="2999-01-01T00:00")
    # Typed as pages print times, in UTC as the label says (no datetime-local picker in the browser's locale).
    assert "gpu900" in shown(object="gpu9", since="2000-01-01 00:00", until="2999-01-01 00:00:00")
    assert "gpu900" not in shown(object="gpu9", until="2000-01-01 00:00")
    unfiltered = shown()
    assert "Since (UTC)" in unfiltered and 'placeholder="YYYY-MM-DD HH:MM"' in unfiltered
    assert "datetime-local" not in unfiltered
    bad = shown(since="yesterday")
    assert 'id="filter-errors"' in bad and "gpu900" not in bad  # the error, and no rows
    assert "Since (UTC): Write a UTC time as YYYY-MM-DD HH:MM" in bad and 'value="yesterday"' in bad


def test_exports_are_the_filtered_log_with_formulas_escaped(browser_as, operator, viewer):
    node = make_node(hostname="gpu901", comments="plain", rack=make_rack(name="r09"))
    with audit.audit_context(source=ChangeSource.UI, user=operator):
        node.comments = "=HYPERLINK(1)"
        node.save()
    page = browser_as(viewer)

    rows = json.loads(b"".join(page.get(reverse("audit-export-json"), {"object": "gpu901"}).streaming_content))
    text = b"".join(page.get(reverse("audit-export-csv"), {"object": "gpu901", "action": "update"}).streaming_content)

    assert {row["action"] for row in rows} == {"Created", "Updated"}
    assert rows[0]["changes"]["comments"] == ["plain", "=HYPERLINK(1)"]
    # In words, as the page shows them: the rack by name under its label, not rack_id and an internal id.
    created = rows[-1]["changes"]
    assert created["rack"] == [None, str(node.rack)] and "rack_id" not in created
    assert text.decode().count("gpu901") == 1 and "'=HYPERLINK" not in text.decode().split("\n")[0]
    assert page.get(reverse("audit-export-csv"), {"since": "nope"}).status_code == 400


def test_a_json_value_reads_as_words_not_a_python_dump(operator):
    """A dict or a list of them in a change ("{'gpu001': [0, 1]}" on the page) reads as its keys and values."""
    node = make_node(hostname="gpu902")
    audit.record(AuditAction.UPDATE, obj=node, changes={"gpus": [None, {"gpu001": [0, 1], "gpu002": [3]}]})

    entry = audit.attach_change_rows([AuditEntry.objects.for_object(node).first()])[0]

    (row,) = entry.rows
    assert (row.before, row.after) == ("—", "gpu001: 0, 1; gpu002: 3")


def test_a_created_row_reads_without_its_id_its_one_to_one_by_name_and_times_as_pages_print_them(operator):
    """A BMC's node by hostname (a one-to-one, not "node: 53"), no "ID" row, a time as every page prints it."""
    from apps.monitoring.models import Bmc

    node = make_node(hostname="gpu903")
    bmc = Bmc.objects.create(node=node, user="admin")
    audit.record(AuditAction.UPDATE, obj=bmc, changes={"expires": [None, "2027-03-06T02:59:02.045046+00:00"]})

    created, updated = audit.attach_change_rows(list(AuditEntry.objects.for_object(bmc).order_by("id")))

    rows = {row.field: row.after for row in created.rows}
    assert rows["node"] == "gpu903" and "ID" not in rows and "id" not in rows
    assert [(row.field, row.after) for row in updated.rows] == [("expires", "2027-03-06 02:59")]
    assert created.object_type_label == "BMC"
