"""The deployment pages: the five-stage wizard, field errors that change nothing, roles, the running view and the
acceptance report."""

import re

import pytest

from apps.core import signing
from apps.deployments import artefacts, services
from apps.deployments.choices import DeploymentState, WizardStage
from apps.deployments.forms import NodesForm
from apps.deployments.models import Approval, Deployment
from apps.jobs import services as job_services


@pytest.fixture
def no_enqueue(monkeypatch):
    """Runs are started by the page; the test runs their shards in-process (run_shards) instead of a worker."""
    monkeypatch.setattr(job_services, "enqueue", lambda job: None)


def wizard(deployment, stage: str) -> str:
    return f"/deployments/{deployment.public_id}/wizard/{stage}/"


@pytest.fixture
def draft(demo_cluster, operator):
    return services.create_deployment(
        name="h200-r04",
        targets=job_services.TargetSpec(racks=("r04",), nodes=("gpu017",)),
        user=operator,
        transport="sim",
    )


def versions_post(deployment, **changes) -> dict:
    """The versions form as the page would post it, from the draft's stored options, with changes."""
    data = {}
    for section, values in deployment.options.items():
        if section == "environment":
            continue
        for name, value in values.items():
            if isinstance(value, bool):
                if value:
                    data[f"{section}__{name}"] = "on"
            else:
                data[f"{section}__{name}"] = value
    data["environment"] = "\n".join(f"{k}={v}" for k, v in deployment.options.get("environment", {}).items())
    data.update(changes)
    return data


def test_anonymous_goes_to_login_and_a_viewer_cannot_start_a_wizard(client, viewer):
    assert client.get("/deployments/").status_code == 302
    client.force_login(viewer)
    assert client.get("/deployments/").status_code == 200
    assert client.get("/deployments/new/").status_code == 403


def test_operator_creates_a_draft_and_every_stage_renders(browser_as, operator, demo_cluster):
    client = browser_as(operator)
    page = client.get("/deployments/new/")
    assert page.status_code == 200
    assert b'value="r04"' in page.content

    response = client.post(
        "/deployments/new/",
        {
            "name": "h200-r04",
            "transport": "sim",
            "racks": ["r04"],
            "hostnames": "gpu017",
            "description": "r04 bring-up",
        },
    )
    deployment = Deployment.objects.get(name="h200-r04")
    assert response.status_code == 302
    assert response["Location"] == wizard(deployment, "versions")
    assert sorted(deployment.nodes.values_list("hostname", flat=True)) == ["gpu017"] + [
        f"gpu{n:03d}" for n in range(25, 33)
    ]

    versions = client.get(wizard(deployment, "versions"))
    assert versions.status_code == 200
    assert b'<option value="13.0" selected>13.0</option>' in versions.content  # pre-selected from the options

    review = client.get(wizard(deployment, "review"))
    assert review.status_code == 200
    text = review.content.decode()
    assert "gpu017" in text and "hbm_bandwidth" in text
    assert "disruptive" in text
    assert "<code>" in text  # the dry run's commands

    approve = client.get(wizard(deployment, "approve"))
    assert approve.status_code == 200
    assert b"Approve plan" in approve.content and b'id="approve-plan" disabled' not in approve.content

    # The list shows it, and a draft's own page reopens the wizard where it was left.
    assert b"h200-r04" in client.get("/deployments/").content
    assert client.get(f"/deployments/{deployment.public_id}/")["Location"] == wizard(deployment, "versions")


def test_unknown_host_name_is_shown_on_its_field_and_creates_nothing(browser_as, operator, demo_cluster):
    client = browser_as(operator)
    response = client.post("/deployments/new/", {"name": "bad", "transport": "sim", "hostnames": "gpu025, nosuch99"})
    assert response.status_code == 400
    field = response.content.decode().split('data-field="hostnames"')[1].split("</div>\n</div>")[0]
    assert "No such node: nosuch99" in field
    assert not Deployment.objects.exists()


def test_a_duplicate_name_and_no_targets_are_refused(browser_as, operator, draft):
    client = browser_as(operator)
    response = client.post("/deployments/new/", {"name": "h200-r04", "transport": "sim", "racks": ["r04"]})
    assert response.status_code == 400
    assert b"already exists" in response.content
    response = client.post("/deployments/new/", {"name": "other", "transport": "sim"})
    assert response.status_code == 400
    assert b"Pick racks, tags or host names." in response.content
    assert Deployment.objects.count() == 1


def test_a_version_outside_the_catalogue_is_shown_on_its_field_and_changes_nothing(browser_as, operator, draft):
    client = browser_as(operator)
    before = dict(draft.options)
    response = client.post(wizard(draft, "versions"), versions_post(draft, versions__cuda="9.9", network__mtu="9100"))
    assert response.status_code == 400
    field = response.content.decode().split('data-field="versions__cuda"')[1].split('<div class="field')[0]
    assert "&#x27;9.9&#x27; is not in the catalogue" in field
    draft.refresh_from_db()
    assert draft.options == before
    assert draft.stage == WizardStage.VERSIONS


def test_back_keeps_every_choice(browser_as, operator, draft):
    client = browser_as(operator)
    response = client.post(
        wizard(draft, "versions"),
        versions_post(draft, versions__cuda="12.8", network__mtu="4200", environment="WANDB_PROJECT=llama"),
    )
    assert response.status_code == 302
    assert response["Location"] == wizard(draft, "review")
    draft.refresh_from_db()
    assert draft.stage == WizardStage.REVIEW
    assert draft.options["versions"]["cuda"] == "12.8"
    assert draft.options["network"]["mtu"] == 4200
    assert draft.options["environment"] == {"WANDB_PROJECT": "llama"}

    review = client.get(wizard(draft, "review")).content.decode()
    assert f'href="{wizard(draft, "versions")}" id="back"' in review
    back = client.get(wizard(draft, "versions")).content.decode()
    assert '<option value="12.8" selected>12.8</option>' in back
    assert 'name="network__mtu" value="4200"' in back
    assert "WANDB_PROJECT=llama" in back
    nodes = client.get(wizard(draft, "nodes")).content.decode()
    assert re.search(r'<input type="checkbox" name="racks" value="r04"[^>]* checked>', nodes)
    assert not re.search(r'<input type="checkbox" name="racks" value="r03"[^>]* checked>', nodes)
    assert 'value="gpu017"' in nodes
    # Going back does not forget how far the wizard got.
    draft.refresh_from_db()
    assert draft.stage == WizardStage.REVIEW


def test_nodes_stage_edits_the_drafts_targets(browser_as, operator, draft):
    client = browser_as(operator)
    response = client.post(wizard(draft, "nodes"), {"racks": ["r04"], "hostnames": "", "description": "only r04"})
    assert response.status_code == 302
    draft.refresh_from_db()
    assert draft.nodes.count() == 8
    assert draft.description == "only r04"
    assert draft.name == "h200-r04"  # fixed once created


def test_criteria_are_edited_in_the_review_stage(browser_as, operator, draft):
    client = browser_as(operator)
    data = {
        f"{check}__{name}": ("" if values.get(name) is None else values[name])
        for check, values in draft.criteria.items()
        for name in ("threshold", "warn_threshold", "retries", "cooldown_seconds")
    }
    data["hbm_bandwidth__cooldown_seconds"] = "0"
    data["nccl_busbw__retries"] = "11"
    response = client.post(wizard(draft, "review"), data)
    assert response.status_code == 400  # retries above 10
    draft.refresh_from_db()
    assert draft.criteria["hbm_bandwidth"]["cooldown_seconds"] == 5.0
    data["nccl_busbw__retries"] = "3"
    response = client.post(wizard(draft, "review"), data)
    assert response["Location"] == wizard(draft, "approve")
    draft.refresh_from_db()
    assert draft.criteria["hbm_bandwidth"]["cooldown_seconds"] == 0
    assert draft.criteria["nccl_busbw"]["retries"] == 3


def test_artefacts_download_from_the_review_page(browser_as, operator, draft):
    client = browser_as(operator)
    name = services.plan_artefacts(draft)[0].name
    response = client.get(f"/deployments/{draft.public_id}/artefacts/{name}/")
    assert response.status_code == 200
    assert response["Content-Disposition"].startswith("attachment;")
    assert client.get(f"/deployments/{draft.public_id}/artefacts/nosuch/").status_code == 404


def test_a_download_renders_the_one_file_asked_for(browser_as, api_as, operator, draft, monkeypatch):
    """Each file is rendered and parsed back to validate it: a download (page or API) pays for its own file only."""
    rendered = []
    real = artefacts.render
    monkeypatch.setattr(
        artefacts, "render", lambda name, *args, **kwargs: rendered.append(name) or real(name, *args, **kwargs)
    )
    name = artefacts.ARTEFACT_NAMES[-1]

    page = browser_as(operator).get(f"/deployments/{draft.public_id}/artefacts/{name}/")
    api = api_as(operator).get(f"/api/deployments/{draft.public_id}/artefacts/?name={name}")

    assert (page.status_code, api.status_code) == (200, 200)
    assert page.content == api.content and rendered == [name, name]
    assert api_as(operator).get(f"/api/deployments/{draft.public_id}/artefacts/?name=nosuch").status_code == 404
    assert rendered == [name, name]


def test_a_viewer_sees_the_approval_but_cannot_approve(client, viewer, draft):
    client.force_login(viewer)
    page = client.get(wizard(draft, "approve"))
    assert page.status_code == 200
    assert b'id="approve-plan" disabled' in page.content
    response = client.post(wizard(draft, "approve"), {})
    assert response.status_code == 403
    draft.refresh_from_db()
    assert draft.state == DeploymentState.DRAFT
    assert not Approval.objects.exists()
    assert client.post(wizard(draft, "versions"), versions_post(draft, network__mtu="1500")).status_code == 403
    draft.refresh_from_db()
    assert draft.options["network"]["mtu"] == 9000


@pytest.mark.django_db(transaction=True)
def test_approve_start_and_follow_a_run(browser_as, operator, draft, no_enqueue, run_shards, settings):
    settings.RACKPILOT_EVENT_FLUSH_MS = 50
    services.update_deployment(
        deployment=draft, criteria_edits={check: {"cooldown_seconds": 0} for check in draft.criteria}
    )
    client = browser_as(operator)
    response = client.post(wizard(draft, "approve"), {})
    assert response["Location"] == wizard(draft, "run")
    draft.refresh_from_db()
    assert draft.state == DeploymentState.APPROVED
    assert Approval.objects.filter(deployment=draft, scope="plan").count() == 1
    # An approved plan can no longer be changed from the wizard.
    client.post(wizard(draft, "versions"), versions_post(draft, network__mtu="1500"))
    draft.refresh_from_db()
    assert draft.options["network"]["mtu"] == 9000

    assert client.get(wizard(draft, "run")).status_code == 200
    response = client.post(wizard(draft, "run"))
    assert response["Location"] == f"/deployments/{draft.public_id}/"
    run = draft.runs.get()
    run_shards(run.job)

    page = client.get(f"/deployments/{draft.public_id}/")
    assert page.status_code == 200
    text = page.content.decode()
    assert 'id="dmatrix"' in text and 'id="matrix"' in text  # all runs, and this run live
    assert "RackpilotJobs.detail" in text
    assert text.count('class="dcell ') == 9 * len(services.matrix(draft)["steps"])
    assert 'id="resume"' in text  # gpu017's BIOS is behind: the deployment needs attention
    assert "Needs attention" in text
    cell = client.get(f"/deployments/{draft.public_id}/cells/gpu017/firmware/")
    assert cell.status_code == 200
    assert b"fail" in cell.content.lower() and b"Raw output of this cell" in cell.content
    partial = client.get(f"/deployments/{draft.public_id}/", headers={"HX-Request": "true"})
    assert partial.content.decode().lstrip().startswith('<div id="summary"')


def test_report_page_and_download(browser_as, viewer, draft):
    client = browser_as(viewer)
    page = client.get(f"/deployments/{draft.public_id}/report/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "Acceptance report: h200-r04" in text and "Accepted: no" in text
    assert "Signed off by" in text and "gpu017" in text
    assert 'class="topbar"' in text  # the page version sits in the portal

    download = client.get(f"/deployments/{draft.public_id}/report/download/")
    assert download.status_code == 200
    assert download["Content-Disposition"] == 'attachment; filename="acceptance-h200-r04.html"'
    body = download.content.decode()
    assert "<style>" in body and "Acceptance report: h200-r04" in body
    assert "<link" not in body and "<script" not in body and 'href="/' not in body  # self-contained
    verified = signing.verify(download.content, trusted_keys=(signing.public_key_b64(),))
    assert verified.intact and verified.trusted_key and verified.signed_by == viewer.username
    assert signing.fingerprint(signing.public_key_b64()) in text  # the page names the key that signs
    # The criteria's warn tier in its unit, as the threshold beside it ("10000.0" read as a bare number).
    assert "<td>1,000 ns</td>\n        <td>10,000 ns</td>" in text
    assert "table.criteria td:not(:last-child) { white-space: nowrap; }" in body  # no "hbm_bandwidt / h"
    assert "text-transform: uppercase" not in body  # a unit as written: "GB/s", not "GB/S"


def test_the_review_and_the_report_name_versions_and_baselines_in_words(browser_as, operator, draft):
    """ "GPU VBIOS baseline", "CUDA toolkit": the words the wizard's form asks in, never the plan's keys ("Baseline
    gpu_vbios", "cuda")."""
    draft.options["baselines"] = {"bios": "2.1.0", "gpu_vbios": "96.00.AF.00.01"}
    draft.save(update_fields=["options"])
    client = browser_as(operator)
    review = client.get(wizard(draft, "review")).content.decode().split("</dl>")[0]
    assert "<dt>GPU VBIOS baseline</dt>" in review and "<dt>BIOS baseline</dt>" in review
    assert "<dt>CUDA toolkit</dt>" in review and "gpu_vbios" not in review
    report = client.get(f"/deployments/{draft.public_id}/report/").content.decode()
    assert "<tr><th>GPU VBIOS</th>" in report and "<tr><th>CUDA toolkit</th>" in report
    assert "<th>gpu_vbios</th>" not in report and "<th>cuda</th>" not in report


def test_the_list_page_and_the_api_filter_deployments_alike(browser_as, api_as, operator, draft):
    approved = services.create_deployment(
        name="h200-r05", targets=job_services.TargetSpec(nodes=("gpu018",)), user=operator, transport="sim"
    )
    services.approve(deployment=approved, user=operator)
    page, api = browser_as(operator), api_as(operator)
    for state, expected in (("draft", {"h200-r04"}), ("approved", {"h200-r05"}), ("", {"h200-r04", "h200-r05"})):
        text = page.get(f"/deployments/?state={state}").content.decode()
        assert {name for name in ("h200-r04", "h200-r05") if f">{name}</a>" in text} == expected, state
        listed = {d["name"] for d in api.get(f"/api/deployments/?state={state}").json()["results"]}
        assert listed == expected, state
    assert 'name="state"' in page.get("/deployments/").content.decode()  # the page offers the filter


@pytest.mark.django_db(transaction=True)
def test_the_suggestion_counter_counts_an_approved_fix_apart(browser_as, operator, draft, no_enqueue, run_shards):
    from apps.deployments.models import Suggestion
    from apps.inventory.models import Node
    from apps.simulator import services as sim

    sim.inject_fault(node=Node.objects.get(hostname="gpu025"), kind="mtu", target="ens1np0")
    sim.inject_fault(node=Node.objects.get(hostname="gpu026"), kind="pfc_off", target="3")
    services.update_deployment(
        deployment=draft, criteria_edits={check: {"cooldown_seconds": 0} for check in draft.criteria}
    )
    services.approve(deployment=draft, user=operator)
    run_shards(services.start(deployment=draft, user=operator).job)
    client = browser_as(operator)
    panel = f"/deployments/{draft.public_id}/suggestions/"

    def counter() -> str:
        text = client.get(panel).content.decode()
        return re.sub(r"<[^>]+>", "", re.search(r'id="suggestion-count">(.*?)</span>\s*</h2>', text).group(1))

    open_count = Suggestion.objects.filter(deployment=draft, state="open").count()
    assert open_count >= 2 and counter() == f"{open_count} open"
    mtu = Suggestion.objects.get(deployment=draft, hostname="gpu025", problem="mtu")
    assert client.post(f"/deployments/suggestions/{mtu.public_id}/approve/").status_code == 302
    assert counter() == f"{open_count - 1} open · 1 fix approved, waiting for a resume"


def test_a_run_that_ended_before_its_deployment_settled_reads_finishing_not_running(
    browser_as, operator, draft, no_enqueue
):
    """The moment between the commit that ends the run's job and the hook that settles the deployment: the page
    says the deployment is finishing, not running beside a failed run."""
    from apps.jobs.models import Job

    services.approve(deployment=draft, user=operator)
    run = services.start(deployment=draft, user=operator)
    Job.objects.filter(pk=run.job.pk).update(status="failed")  # ended; job_finished has not run yet
    text = browser_as(operator).get(f"/deployments/{draft.public_id}/").content.decode()
    assert re.search(r'id="deployment-state">Finishing<', text) and 'data-state="settling"' in text
    assert re.search(r'id="job-status">Failed<', text)
    assert 'id="deployment-state">Running<' not in text
    assert re.search(r'class="dcell [a-z]+" data-host="gpu017" data-step="gpus" data-phase="1"', text)


@pytest.mark.parametrize(("install", "shown"), [("sim", "sim"), ("ssh", "ssh"), ("local", "ssh")])
def test_the_new_plan_form_offers_the_installs_default_transport(settings, install, shown):
    settings.RACKPILOT_JOB_DEFAULT_TRANSPORT = install  # a deployment runs over ssh or sim: local falls to ssh
    assert NodesForm()["transport"].initial == shown


def test_the_api_names_every_bad_field_of_a_new_plan_at_once(api_as, operator, draft):
    response = api_as(operator).post(
        "/api/deployments/",
        {"name": "h200-r04", "targets": {"nodes": ["nosuch99"]}, "criteria": {"no-such-check": {}}},
        format="json",
    )

    assert response.status_code == 400
    assert {"name", "targets", "criteria.no-such-check"} <= set(response.data), response.data
    assert Deployment.objects.count() == 1


def test_the_nodes_stage_names_every_bad_field_at_once(browser_as, operator, demo_cluster):
    """A name too long for the form no longer hides the host name that matches nothing (the plan's check)."""
    response = browser_as(operator).post(
        "/deployments/new/", {"name": "n" * 65, "transport": "sim", "hostnames": "gpu025, nosuch99"}
    )

    assert response.status_code == 400
    errors = response.context["form"].errors
    assert "at most 64 characters" in str(errors["name"]) and "nosuch99" in str(errors["hostnames"]), errors
    assert not Deployment.objects.exists()


def test_the_versions_stage_names_every_bad_field_at_once(browser_as, operator, draft):
    """The form's rules (RSS queues not a number), the edits' (a relative mount), the files' (MTU 99999), together."""
    before = dict(draft.options)
    post = versions_post(draft, network__rss_queues="many", network__mtu=99999, checkpoints__mount="checkpoints")

    response = browser_as(operator).post(wizard(draft, "versions"), post)

    assert response.status_code == 400
    errors = response.context["form"].errors
    assert {"network__rss_queues", "network__mtu", "checkpoints__mount"} <= set(errors), errors
    draft.refresh_from_db()
    assert draft.options == before
