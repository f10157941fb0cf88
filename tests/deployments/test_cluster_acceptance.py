"""Phase 5, cluster acceptance, on the simulated demo cluster: a healthy 4-node deployment passes it (multi-node
NCCL, the sweep, HPL-MxP); a degraded cable makes the sweep name it down to NIC, cable and switch port and the phase
fail with the suggestion; the report holds the cluster results and its signed download still verifies."""

import pytest
from django.urls import reverse

from apps.core import signing
from apps.deployments import cluster, report, services, tasks
from apps.deployments.choices import ClusterCheck, ClusterCheckStatus, DeploymentState, Outcome, Problem
from apps.deployments.models import ClusterAcceptanceCheck, Deployment, Suggestion
from apps.inventory.models import Node
from apps.jobs.services import TargetSpec
from apps.simulator import services as sim

NO_WAIT = {
    check: {"cooldown_seconds": 0} for check in ("hbm_bandwidth", "nvlink_bandwidth", "nccl_busbw", "ptp_offset")
}
FOUR = ("gpu029", "gpu030", "gpu031", "gpu032")


@pytest.fixture(autouse=True)
def references(shipped_references):
    return shipped_references


def _deploy(operator, run_shards, *, name="r04-half", nodes=FOUR, options=None):
    deployment = services.create_deployment(
        name=name,
        targets=TargetSpec(nodes=nodes),
        user=operator,
        criteria_edits=NO_WAIT,
        option_edits=options,
        transport="sim",
    )
    services.approve(deployment=deployment, user=operator)
    run = services.start(deployment=deployment, user=operator)
    run_shards(run.job)
    return Deployment.objects.get(pk=deployment.pk)


@pytest.mark.django_db(transaction=True)
def test_a_healthy_four_node_deployment_passes_cluster_acceptance(
    demo_cluster, operator, viewer, run_shards, client, api_client, api_as
):
    deployment = _deploy(operator, run_shards)
    assert deployment.options["acceptance"] == {"cluster": True}  # on by default for two nodes or more
    # Every node verified: the phase is queued and the deployment still runs until it has spoken.
    assert deployment.state == DeploymentState.RUNNING
    queued = ClusterAcceptanceCheck.objects.filter(deployment=deployment)
    assert {c.check_name for c in queued} == set(ClusterCheck.values)
    assert {c.status for c in queued} == {ClusterCheckStatus.QUEUED}

    assert tasks.cluster_acceptance(str(deployment.public_id)) == DeploymentState.PASSED

    checks = {c.check_name: c for c in cluster.latest_checks(deployment)}
    assert {name: c.outcome for name, c in checks.items()} == {name: Outcome.PASS for name in ClusterCheck.values}
    nccl = checks[ClusterCheck.NCCL]
    assert nccl.benchmark_run.suite == "nccl" and nccl.benchmark_run.nodes.count() == 4
    assert nccl.details["busbw_gbps"] > 300 and nccl.details["expected_gbps"] == 360
    assert "GB/s" in nccl.value and "reference 360" in nccl.criterion
    sweep = checks[ClusterCheck.SWEEP]
    assert sweep.benchmark_run.suite == "nccl-sweep" and sweep.value == "no slow node or link"
    assert sweep.details["suspects"] == [] and sweep.details["rounds"] <= sweep.details["round_bound"]
    hpl = checks[ClusterCheck.HPL]
    assert hpl.benchmark_run.suite == "hpl-mxp" and len(hpl.details["measurements"]) == 5  # 4 nodes + the set
    assert not Suggestion.objects.filter(deployment=deployment, step__startswith="cluster-").exists()

    client.force_login(operator)
    page = client.get(reverse("deployment-detail", args=[deployment.public_id])).content.decode()
    assert 'id="cluster-acceptance"' in page and "5. Cluster acceptance" in page
    assert page.count('class="cluster-check ') == 3

    data = report.context(deployment)
    assert data["accepted"] and data["cluster"]["outcome"] == Outcome.PASS
    body = report.as_json(deployment)["cluster_acceptance"]
    assert [c["check"] for c in body["checks"]] == list(ClusterCheck.values)

    # Over the API: viewers read the phase, only operators run it again.
    url = reverse("api:deployment-cluster-acceptance", args=[deployment.public_id])
    assert api_client.get(url).status_code in (401, 403)
    listed = api_as(viewer).get(url)
    assert listed.status_code == 200 and [c["outcome"] for c in listed.json()] == ["pass"] * 3
    assert listed.json()[1]["benchmark_run"] == str(sweep.benchmark_run.public_id)
    assert api_as(viewer).post(url).status_code == 403
    again = api_as(operator).post(url)
    assert again.status_code == 202 and {c["attempt"] for c in again.json()} == {2}
    assert api_as(operator).post(url).status_code == 400  # already queued
    assert Deployment.objects.get(pk=deployment.pk).state == DeploymentState.RUNNING


@pytest.mark.django_db(transaction=True)
def test_a_degraded_cable_is_named_and_fails_the_phase_with_the_suggestion(
    demo_cluster, operator, run_shards, client, tmp_path
):
    deployment = _deploy(operator, run_shards)
    assert deployment.state == DeploymentState.RUNNING  # every node verified; phase 5 queued
    # The cable degrades after the per-node checks (a link that renegotiated down): only phase 5 can see it now.
    node = Node.objects.get(hostname="gpu031")
    sim.inject_fault(node=node, kind="degraded_cable", target="ens3np0", parameters={"rate_gbps": 200})

    state = tasks.cluster_acceptance(str(deployment.public_id))
    assert state == DeploymentState.FAILED, [
        (c.check_name, c.value, c.summary) for c in cluster.latest_checks(deployment)
    ]

    checks = {c.check_name: c for c in cluster.latest_checks(deployment)}
    sweep = checks[ClusterCheck.SWEEP]
    assert sweep.outcome == Outcome.FAIL
    [suspect] = sweep.details["suspects"]
    nic = node.nics.get(name="ens3np0")
    cable = nic.cable_as_a if hasattr(nic, "cable_as_a") else nic.cable_as_b
    assert (suspect["node"], suspect["nic"], suspect["cable"]) == (
        "gpu031",
        "ens3np0",
        cable.label or str(cable.public_id),
    )
    assert suspect["switch"] and suspect["switch_port"]
    assert checks[ClusterCheck.NCCL].outcome in (Outcome.FAIL, Outcome.WARN)
    suggestion = Suggestion.objects.get(deployment=deployment, step=ClusterCheck.SWEEP)
    assert suggestion.problem == Problem.SLOW_LINK and suggestion.hostname == "gpu031"
    assert suspect["switch_port"] in suggestion.title and suspect["cable"] in suggestion.title
    assert "ens3np0" in suggestion.title and "cable" in suggestion.fix

    client.force_login(operator)
    panel = client.get(reverse("deployment-cluster", args=[deployment.public_id])).content.decode()
    assert "gpu031" in panel and suspect["switch_port"] in panel and 'data-outcome="fail"' in panel

    data = report.context(deployment)
    assert not data["accepted"]
    page = report.html(deployment, standalone=True)
    assert 'id="cluster-acceptance"' in page and "<svg" in page and suspect["cable"] in page
    assert page.index('id="cluster-acceptance"') < page.index('<details class="clean-nodes"')

    # The signed download carries the cluster results and verifies; one byte changed and it does not.
    download = client.get(reverse("deployment-report-download", args=[deployment.public_id]))
    sealed = download.content
    assert b"Cluster acceptance" in sealed and suspect["switch_port"].encode() in sealed
    assert signing.verify(sealed).intact
    tampered = sealed.replace(b"gpu031", b"gpu03l", 1)
    assert not signing.verify(tampered).intact

    # Fixed, then run again: the phase passes and the suggestion is resolved.
    sim.clear_all(node)
    services.rerun_cluster_acceptance(deployment=deployment, user=operator)
    assert Deployment.objects.get(pk=deployment.pk).state == DeploymentState.RUNNING
    assert tasks.cluster_acceptance(str(deployment.public_id)) == DeploymentState.PASSED
    suggestion.refresh_from_db()
    assert suggestion.state == "resolved"
    assert {c.attempt for c in cluster.latest_checks(deployment)} == {2}


@pytest.mark.django_db(transaction=True)
def test_the_phase_is_optional(demo_cluster, operator, run_shards, api_as):
    deployment = _deploy(operator, run_shards, options={"acceptance": {"cluster": False}})
    assert deployment.state == DeploymentState.PASSED
    assert not ClusterAcceptanceCheck.objects.filter(deployment=deployment).exists()

    one = _deploy(operator, run_shards, name="single", nodes=("gpu028",))
    assert one.options["acceptance"] == {"cluster": False} and one.state == DeploymentState.PASSED

    client = api_as(operator)
    bad = client.post(
        reverse("api:deployment-list"),
        {"name": "bad", "targets": {"nodes": list(FOUR)}, "options": {"acceptance": {"cluster": "yes"}}},
        format="json",
    )
    assert bad.status_code == 400 and "options.acceptance.cluster" in bad.json()
    assert not Deployment.objects.filter(name="bad").exists()
