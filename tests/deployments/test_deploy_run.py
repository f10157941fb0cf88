"""A deployment run end to end on the simulated demo cluster: faults found with the right verdicts and suggestions,
fixes approved, resume finishes green; the same over the REST API; bad input refused with nothing started."""

import pytest
from django.urls import reverse

from apps.deployments import report, services, tasks
from apps.deployments.choices import DeploymentState, Outcome, SuggestionState
from apps.deployments.models import Deployment, Suggestion, Verdict
from apps.inventory.choices import NodeStatus
from apps.inventory.models import Node
from apps.jobs.choices import StepStatus
from apps.jobs.models import Job
from apps.jobs.services import TargetSpec
from apps.simulator import services as sim

NO_WAIT = {
    check: {"cooldown_seconds": 0} for check in ("hbm_bandwidth", "nvlink_bandwidth", "nccl_busbw", "ptp_offset")
}


@pytest.fixture
def faulty_cluster(demo_cluster):
    sim.inject_fault(node=Node.objects.get(hostname="gpu025"), kind="mtu", target="ens1np0")
    sim.inject_fault(node=Node.objects.get(hostname="gpu026"), kind="pfc_off", target="3")
    sim.inject_fault(node=Node.objects.get(hostname="gpu027"), kind="xid79", target="0")
    return demo_cluster  # gpu017 runs a BIOS one version behind the rest (demo data)


def _run(run, run_shards):
    run_shards(run.job)
    return {(s.hostname, s.step): s for s in run.job.steps.all()}


@pytest.mark.django_db(transaction=True)
def test_faults_fail_the_right_cells_and_resume_finishes_green(
    faulty_cluster, operator, run_shards, browser_as, monkeypatch
):
    deployment = services.create_deployment(
        name="r04-bringup",
        targets=TargetSpec(racks=("r04",), nodes=("gpu017",)),
        user=operator,
        criteria_edits=NO_WAIT,
        transport="sim",
    )
    assert deployment.options["baselines"]["bios"] == "2.4.1"  # the version most of the chosen nodes run
    services.approve(deployment=deployment, user=operator)
    cells = _run(services.start(deployment=deployment, user=operator), run_shards)

    failed = {key for key, cell in cells.items() if cell.status in (StepStatus.FAILED, StepStatus.ERROR)}
    assert failed == {("gpu025", "mtu"), ("gpu026", "roce"), ("gpu027", "gpus"), ("gpu017", "firmware")}
    assert cells["gpu025", "mtu"].summary.startswith("needs approval to fix — ens1np0: 1500")
    assert cells["gpu027", "driver"].status == StepStatus.SKIPPED  # a failed phase 1 stops the node there
    assert all(
        cells["gpu028", step].status in (StepStatus.SUCCEEDED, StepStatus.SKIPPED) for step in ("mtu", "nccl-env")
    )

    mtu = Verdict.objects.get(deployment=deployment, hostname="gpu025", check_name="mtu", subject="ens1np0")
    assert (mtu.outcome, mtu.value, mtu.criterion) == (Outcome.FAIL, "1500", "MTU equal to 9000")
    hbm = Verdict.objects.filter(deployment=deployment, hostname="gpu028", check_name="hbm_bandwidth").first()
    assert hbm.outcome == Outcome.PASS and hbm.reference and "% of" in hbm.criterion

    suggestions = {s.hostname: s for s in Suggestion.objects.filter(deployment=deployment)}
    assert set(suggestions) == {"gpu017", "gpu025", "gpu026", "gpu027"}
    assert (
        "MTU" in suggestions["gpu025"].title
        and "ip link set dev ens1np0 mtu 9000" in suggestions["gpu025"].fix_commands
    )
    assert "PFC" in suggestions["gpu026"].title and suggestions["gpu026"].remediation_step == "roce"
    assert "XID 79" in suggestions["gpu027"].title and not suggestions["gpu027"].remediation_step
    assert "Firmware" in suggestions["gpu017"].title
    assert any("/var/lib/rackpilot/firmware/bios/2.4.1.cab" in c for c in suggestions["gpu017"].fix_commands)
    assert Deployment.objects.get(pk=deployment.pk).state == DeploymentState.FAILED  # set when the job ended
    # The suggestions panel, as htmx fetches it when a run ends: the suggestions, not the run's whole summary again.
    with monkeypatch.context() as patched:
        patched.setattr(services, "matrix", lambda deployment: pytest.fail("the panel worked out the summary"))
        url = reverse("deployment-suggestions", args=[deployment.public_id])
        panel = browser_as(operator).get(url).content.decode()
    assert '<span id="suggestion-open">4</span> open' in panel and "ip link set dev ens1np0 mtu 9000" in panel

    for hostname in ("gpu025", "gpu026", "gpu027"):
        sim.clear_all(Node.objects.get(hostname=hostname))
    services.approve_suggestion(suggestion=suggestions["gpu017"], user=operator)
    second = services.resume(deployment=deployment, user=operator)
    assert sorted(second.job.nodes.values_list("hostname", flat=True)) == ["gpu017", "gpu025", "gpu026", "gpu027"]
    cells = _run(second, run_shards)

    assert not [key for key, cell in cells.items() if cell.status in (StepStatus.FAILED, StepStatus.ERROR)]
    assert cells["gpu025", "hbm"].summary == "verified in run 1"  # not redone
    assert cells["gpu017", "firmware"].summary.startswith("applied 1 change, verified")
    # Every node verified: phase 5, cluster acceptance (on by default for 9 nodes), decides.
    assert Deployment.objects.get(pk=deployment.pk).state == DeploymentState.RUNNING
    assert tasks.cluster_acceptance(str(deployment.public_id)) == DeploymentState.PASSED
    assert Deployment.objects.get(pk=deployment.pk).state == DeploymentState.PASSED
    assert Suggestion.objects.filter(deployment=deployment, state=SuggestionState.OPEN).count() == 0
    assert set(Node.objects.filter(rack__name="r04").values_list("status", flat=True)) == {NodeStatus.READY}
    with pytest.raises(services.DeploymentError):
        services.resume(deployment=deployment, user=operator)  # nothing left to do

    # The report keeps run 1's failures with how each ended, and collapses the nodes that never failed.
    data = report.context(deployment)
    ended = {(f["hostname"], f["check"]): (f["run"], f["now"], f["now_run"]) for f in data["earlier_failures"]}
    assert ended[("gpu027", "gpu_count")][0] == 1 and ended[("gpu027", "gpu_count")][1:] == ("pass", 2)
    assert ended[("gpu025", "mtu")] == (1, "pass", 2)
    firmware = next(f for f in data["earlier_failures"] if f["hostname"] == "gpu017")
    assert any("fix approved by " + operator.username in fix for fix in firmware["fixes"])
    # gpu025's MTU was put right by hand (nobody approved its suggestion): the signed report names no approver.
    mtu = next(f for f in data["earlier_failures"] if f["hostname"] == "gpu025" and f["check"] == "mtu")
    assert mtu["fixes"] and not any("approved by" in fix for fix in mtu["fixes"])
    assert all("no fix approved" in fix for fix in mtu["fixes"])
    assert "approved by someone" not in report.html(deployment, standalone=True)
    assert {n["hostname"] for n in data["attention_nodes"]} == {"gpu017", "gpu025", "gpu026", "gpu027"}
    assert "gpu028" in {n["hostname"] for n in data["clean_nodes"]}
    page = report.html(deployment, standalone=True)
    assert page.index('id="earlier-failures"') < page.index('<details class="clean-nodes"')


@pytest.mark.django_db(transaction=True)
def test_deployment_over_the_rest_api(demo_cluster, operator, api_as, run_shards):
    client = api_as(operator)
    created = client.post(
        reverse("api:deployment-list"),
        {"name": "api-one", "targets": {"nodes": ["gpu030"]}, "transport": "sim", "criteria": NO_WAIT},
        format="json",
    )
    assert created.status_code == 201, created.json()
    url = reverse("api:deployment-detail", args=[created.json()["id"]])
    plan = client.get(url + "plan/").json()
    steps = {step["step"]: step for step in plan["nodes"][0]["steps"]}
    assert steps["mtu"]["disruptive"] and steps["mtu"]["applies"][0] == "ip link set dev ens1np0 mtu 9000"
    assert steps["nccl-env"]["reads"][-1].startswith("all_reduce_perf -b 8 -e 1G")
    artefacts = {item["name"]: item for item in client.get(url + "artefacts/").json()}
    assert "NCCL_SOCKET_IFNAME" in artefacts["nccl-conf"]["content"]
    assert "KubeSchedulerConfiguration" in artefacts["kube-scheduler"]["content"]
    assert client.post(url + "start/").status_code == 400  # not approved yet
    assert client.post(url + "approve/", {"steps": ["driver"]}, format="json").status_code == 200
    started = client.post(url + "start/")
    assert started.status_code == 202
    run_shards(Job.objects.get(public_id=started.json()["runs"][0]["job"]))
    body = client.get(url).json()
    assert body["state"] == "passed", client.get(url + "verdicts/").json()
    report = client.get(url + "report/").json()
    assert report["accepted"] and report["nodes"][0]["verdicts"]
    assert [a["scope"] for a in client.get(url + "approvals/").json()] == ["plan", "step"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"name": "x", "targets": {"nodes": ["gpu999"]}}, "targets"),
        (
            {"name": "x", "targets": {"racks": ["r04"]}, "options": {"versions": {"cuda": "11.0"}}},
            "options.versions.cuda",
        ),
        ({"name": "x", "targets": {"racks": ["r04"]}, "options": {"network": {"mtu": 20000}}}, "options.network.mtu"),
        ({"name": "x; rm -rf /", "targets": {"racks": ["r04"]}}, "name"),
        (
            {"name": "x", "targets": {"racks": ["r04"]}, "criteria": {"hbm_bandwidth": {"retries": 99}}},
            "criteria.hbm_bandwidth.retries",
        ),
    ],
)
def test_bad_input_names_the_field_and_creates_nothing(demo_cluster, operator, api_as, payload, field):
    response = api_as(operator).post(reverse("api:deployment-list"), payload, format="json")
    assert response.status_code == 400
    assert field in response.json(), response.json()
    assert not Deployment.objects.exists()


@pytest.mark.django_db
def test_viewer_cannot_approve_and_nothing_starts(demo_cluster, operator, viewer, api_as):
    deployment = services.create_deployment(name="d", targets=TargetSpec(nodes=("gpu030",)), user=operator)
    url = reverse("api:deployment-detail", args=[deployment.public_id])
    assert api_as(viewer).post(url + "approve/").status_code == 403
    with pytest.raises(services.DeploymentError):
        services.approve(deployment=deployment, user=viewer)
    deployment.refresh_from_db()
    assert deployment.state == DeploymentState.DRAFT and not deployment.approvals.exists()
    assert not Job.objects.exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("fault", "target", "options", "step", "problem"),
    [
        ("nvlink_down", "2", {}, "nvlink", "nvlink"),
        ("ecc", "1", {}, "ecc", "ecc"),
        ("pcie_downtrained", "3", {}, "pcie", "pcie_downtrained"),
        ("nic_down", "ens2np0", {}, "links", "nic_down"),
        ("degraded_cable", "ens2np0", {}, "links", "nic_speed"),
        ("straggler", "", {}, "hbm", "hbm_low"),
        ("ptp_unsynced", "", {}, "ptp", "ptp"),
        (None, "", {"nccl": {"socket_ifname": "eth9"}}, "nccl-env", "nccl_socket_ifname"),
    ],
)
def test_each_known_problem_fails_its_step_with_its_suggestion(
    demo_cluster, operator, run_shards, fault, target, options, step, problem
):
    node = Node.objects.get(hostname="gpu031")
    if fault:
        sim.inject_fault(node=node, kind=fault, target=target)
    criteria = {**NO_WAIT, "hbm_bandwidth": {"cooldown_seconds": 0, "retries": 1}}
    deployment = services.create_deployment(
        name=f"one-{step}",
        targets=TargetSpec(nodes=("gpu031",)),
        user=operator,
        option_edits=options,
        criteria_edits=criteria,
        transport="sim",
    )
    services.approve(deployment=deployment, user=operator)
    cells = _run(services.start(deployment=deployment, user=operator), run_shards)

    failed = [name for (_, name), cell in cells.items() if cell.status in (StepStatus.FAILED, StepStatus.ERROR)]
    assert failed == [step], {k: c.summary for k, c in cells.items() if c.status != StepStatus.SUCCEEDED}
    suggestion = Suggestion.objects.get(deployment=deployment, step=step)
    assert suggestion.problem == problem and suggestion.cause and suggestion.next_check and suggestion.evidence
    if step == "links":  # the NIC's cable by its far end, and the NIC itself in what to check (not "<nic>")
        assert "(ens2np0, cabled to leaf-r04-" in suggestion.title and " port swp" in suggestion.title
        assert "ethtool ens2np0" in suggestion.next_check and "<nic>" not in suggestion.next_check
    if step == "hbm":  # a noisy measurement is retried (after the cool-down) before it fails
        assert set(Verdict.objects.filter(deployment=deployment, step="hbm").values_list("attempts", flat=True)) == {2}
