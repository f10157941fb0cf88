"""Phase 5, cluster acceptance, on the simulated demo cluster: a healthy 4-node deployment passes it (multi-node
NCCL, the sweep, HPL-MxP); a degraded cable makes the sweep name it down to NIC, cable and switch port and the phase
fail with the suggestion; the report holds the cluster results and its signed download still verifies."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from apps.benchmarks import services as benchmarks
from apps.benchmarks.models import BenchmarkRun
from apps.core import signing
from apps.deployments import cluster, report, services, tasks
from apps.deployments.choices import ClusterCheck, ClusterCheckStatus, DeploymentState, Outcome, Problem
from apps.deployments.models import ClusterAcceptanceCheck, Deployment, Suggestion
from apps.health.models import HealthEvent
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
    assert nccl.details["busbw_gb_per_s"] > 300 and nccl.details["expected_gb_per_s"] == 360
    assert "GB/s" in nccl.value and "reference 360" in nccl.criterion
    sweep = checks[ClusterCheck.SWEEP]
    assert sweep.benchmark_run.suite == "nccl-sweep" and sweep.value == "no slow node or link"
    assert sweep.details["suspects"] == [] and sweep.details["rounds"] <= sweep.details["round_bound"]
    hpl = checks[ClusterCheck.HPL]
    assert hpl.benchmark_run.suite == "hpl-mxp" and len(hpl.details["measurements"]) == 5  # 4 nodes + the set
    # "Lowest" is the lowest share of each figure's own expectation (the set's is the multi-node model's, below a
    # node's), named as what it is: the set's figure is not two of its nodes'.
    rows = hpl.details["measurements"]
    lowest = min(rows, key=lambda row: row["value"] / row["expected"])
    who = lowest["hosts"][0] if len(lowest["hosts"]) == 1 else "all 4 nodes together"
    assert hpl.value.endswith(f"% of the {lowest['expected']:,.0f} expected ({who})"), hpl.value
    assert "multi-node expectation" in hpl.criterion
    assert cluster.chart(hpl).count('class="expected"') == 5  # each bar marked at its own expectation
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
def test_a_cable_with_only_crc_errors_is_caught_by_its_nic_counters(demo_cluster, operator, run_shards):
    deployment = _deploy(operator, run_shards)
    # After phases 1-4 the cable starts corrupting frames; it still links at full rate, so NCCL stays near the
    # reference (RoCE resends the window) and only the NIC's error counters, read around the test, show it.
    node = Node.objects.get(hostname="gpu031")
    sim.inject_fault(
        node=node, kind="degraded_cable", target="ens3np0", parameters={"rate_gbps": 0, "crc_per_million": 50}
    )

    assert tasks.cluster_acceptance(str(deployment.public_id)) == DeploymentState.FAILED

    checks = {c.check_name: c for c in cluster.latest_checks(deployment)}
    nccl = checks[ClusterCheck.NCCL]
    assert nccl.details["busbw_gb_per_s"] >= nccl.details["warn_gb_per_s"]  # the bandwidth alone passes it
    assert nccl.outcome == Outcome.FAIL and "link errors: gpu031 ens3np0" in nccl.value
    [found] = nccl.details["link_errors"]  # the other 31 data NICs of the set did not count an error
    nic = node.nics.get(name="ens3np0")
    cable = nic.cable_as_a if hasattr(nic, "cable_as_a") else nic.cable_as_b
    assert (found["node"], found["nic"], found["cable"]) == ("gpu031", "ens3np0", cable.label or str(cable.public_id))
    assert found["switch"] and found["switch_port"]
    assert set(found["grew"]) == {"rx_crc_errors_phy", "rx_symbol_err_phy"}
    # errors ∝ frames the cable carried: 50 per million of the frames received over the test
    assert found["frames"] > 1_000_000 and found["errors_per_million"] == pytest.approx(50, rel=0.01)
    assert found["verdict"] == Outcome.FAIL and nccl.details["counters_unread"] == []
    assert "CRC/symbol errors" in nccl.criterion

    suggestion = Suggestion.objects.get(deployment=deployment, step=ClusterCheck.NCCL, problem=Problem.LINK_ERRORS)
    assert suggestion.hostname == "gpu031" and suggestion.subject == "ens3np0"
    assert found["cable"] in suggestion.title and found["switch_port"] in suggestion.title
    assert "rx_crc_errors_phy" in suggestion.cause
    assert "node: gpu031; nic: ens3np0" in suggestion.evidence and "{'" not in suggestion.evidence  # in words
    # ... and a health event on that cable, linked to the deployment and the run (apps/health).
    event = HealthEvent.objects.get(kind="link_errors")
    assert (event.cable, event.nic, event.source, event.severity) == (cable, nic, "acceptance", "major")
    assert event.evidence[0]["deployment"] == str(deployment.public_id)
    assert event.evidence[0]["benchmark_run"] == str(nccl.benchmark_run.public_id)

    # The thresholds are data: with the tiers raised above the rate the same cable only warns.
    deployment.criteria["nic_link_errors"] |= {"threshold": 0.0, "warn_threshold": 100.0}
    Deployment.objects.filter(pk=deployment.pk).update(criteria=deployment.criteria)
    services.rerun_cluster_acceptance(deployment=deployment, user=operator)
    tasks.cluster_acceptance(str(deployment.public_id))
    nccl = next(c for c in cluster.latest_checks(deployment) if c.check_name == ClusterCheck.NCCL)
    assert nccl.outcome == Outcome.WARN and nccl.details["link_errors"][0]["verdict"] == Outcome.WARN
    # The report's header names the cluster phase's warning beside the nodes' counts (was "warn: 0" alone).
    page = report.html(deployment, standalone=True)
    counts = page.split('id="report-node-counts">')[1].split("</dd>")[0]
    assert "warn: 0" not in counts and counts.startswith("pass: ")
    outcome = page.split('id="report-cluster-outcome">')[1].split("</dd>")[0]
    assert "Multi-node NCCL all_reduce: warn" in outcome


@pytest.mark.django_db(transaction=True)
def test_a_lost_phase_task_is_requeued_then_failed_by_the_reaper(
    demo_cluster, operator, run_shards, settings, monkeypatch
):
    sent = []
    monkeypatch.setattr(cluster, "enqueue", lambda deployment: sent.append(deployment.pk))
    settings.RACKPILOT_JOB_WORKER_LOSS_RERUNS = 1
    deployment = _deploy(operator, run_shards)
    assert sent == [deployment.pk]  # the phase's task, sent when it was scheduled
    nccl = ClusterAcceptanceCheck.objects.get(deployment=deployment, check_name=ClusterCheck.NCCL)
    started = timezone.now() - timedelta(minutes=10)

    def worker_took_it_and_died():
        # A worker claimed the NCCL check and started its benchmark, then was killed: nothing moves any more.
        run = benchmarks.start_run(
            suite="nccl", targets=TargetSpec(nodes=FOUR), transport="sim", requested_by=operator, queue=False
        )
        BenchmarkRun.objects.filter(pk=run.pk).update(status="running", started=started)
        ClusterAcceptanceCheck.objects.filter(pk=nccl.pk).update(
            status=ClusterCheckStatus.RUNNING, started=started, updated=started, benchmark_run=run
        )
        return run

    run = worker_took_it_and_died()
    assert cluster.reap_lost_checks(now=started + timedelta(seconds=10)) == 0  # within the stale allowance
    assert tasks.settle() == 1
    nccl.refresh_from_db()
    assert nccl.status == ClusterCheckStatus.QUEUED and nccl.benchmark_run is None
    assert nccl.details["requeued"] == 1 and "worker lost" in nccl.details["lost"]
    run.refresh_from_db()
    assert run.status == "error" and run.summary.startswith("worker lost")
    assert sent == [deployment.pk] * 2  # the task again, to run what is queued
    assert Deployment.objects.get(pk=deployment.pk).state == DeploymentState.RUNNING

    # Lost again, with no re-run left: the check could not run, saying why, and the task runs the rest and settles.
    worker_took_it_and_died()
    assert tasks.settle() == 1
    nccl.refresh_from_db()
    assert (nccl.status, nccl.outcome) == (ClusterCheckStatus.DONE, Outcome.COULD_NOT_RUN)
    assert nccl.summary.startswith("worker lost: the ") and "check stopped (last sign of life" in nccl.summary
    assert "re-queued 1 time already" in nccl.summary and len(sent) == 3
    assert tasks.cluster_acceptance(str(deployment.public_id)) == DeploymentState.FAILED
    assert {c.check_name: c.outcome for c in cluster.latest_checks(deployment)} == {
        ClusterCheck.NCCL: Outcome.COULD_NOT_RUN,
        ClusterCheck.SWEEP: Outcome.PASS,
        ClusterCheck.HPL: Outcome.PASS,
    }

    # Run again, and the task's message is lost before any worker takes it: sent again after the re-queue wait.
    services.rerun_cluster_acceptance(deployment=deployment, user=operator)
    assert len(sent) == 4
    waited = timezone.now() + timedelta(seconds=settings.RACKPILOT_JOB_REQUEUE_WAIT_SECONDS + 1)
    assert cluster.reap_lost_checks(now=timezone.now()) == 0
    assert cluster.reap_lost_checks(now=waited) == 3 and len(sent) == 5
    assert {c.status for c in cluster.latest_checks(deployment)} == {ClusterCheckStatus.QUEUED}
    assert cluster.reap_lost_checks(now=waited) == 0  # touched: it waits again before sending once more


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


def test_a_set_of_more_than_eight_nodes_is_counted_whole():
    # The stored rows list eight names and "... 18 hosts" (an NVL72 domain's 18 trays): the count is the set's.
    trays = [f"nvl01-t{index:02}" for index in range(1, 19)]
    row = {"value": 243_168.0, "unit": "GFLOPS", "expected": None, "hosts": [*trays[:8], "... 18 hosts"]}
    assert cluster._hpl_lowest({**row, "host_count": 18}) == "lowest 243,168 GFLOPS per GPU (all 18 nodes together)"
    assert cluster._hpl_lowest({**row, "hosts": trays[:1], "host_count": 1}).endswith("(nvl01-t01)")
