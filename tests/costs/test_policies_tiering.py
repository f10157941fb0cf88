"""Cost policy 3, storage tiering: the survey (find -atime, lsof) on the simulator, the proposal's files and saving,
files held open and a running job's newest checkpoint left alone, apply (moves and a manifest), revert (moves them
back), one argv element per path whatever its characters, bad parameters and viewers refused."""

import asyncio
import datetime as dt
import shlex

import pytest
from django.urls import reverse
from django.utils import timezone

from apps.core.models import AuditEntry
from apps.costs import services as policies
from apps.costs.choices import ActionState
from apps.costs.kinds.tiering import MOVE, StorageTieringJob
from apps.costs.models import CostPolicy, PolicyAction
from apps.costs.policies.tiering import in_use_checkpoints
from apps.costs.policies.tiering import summary as tiering_summary
from apps.costs.tiering_commands import move_argv
from apps.inventory.demo import ClusterShape, load_cluster
from apps.inventory.models import Node
from apps.jobs.kinds import StepSpec
from apps.jobs.models import Job
from apps.nodeexec.base import CommandResult, NodeTarget
from apps.nodeexec.catalogue import shell_join
from apps.parsers.files import parse_find_printf
from apps.simulator import services as simulator
from apps.workloads.choices import TrainingState
from apps.workloads.models import TrainingJob
from apps.workloads.services import set_training_nodes

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("on_the_simulator")]
PARAMETERS = {"node": "gpu001", "source_path": "/scratch", "age_days": 7}
URL = "/api/cost-policies/"
DAY = 86400


@pytest.fixture
def fleet(clock, db):
    load_cluster(ClusterShape(compute_nodes=1, nodes_per_rack=1, management_nodes=0))
    return Node.objects.get(hostname="gpu001")


@pytest.fixture
def policy(fleet):
    parameters = policies.check_parameters(kind="storage_tiering", parameters=PARAMETERS, nodes=Node.objects.none())
    return CostPolicy.objects.create(name="tiering", kind="storage_tiering", parameters=parameters)


def listing(node, path: str):
    """What find says is under `path` on the simulated node now: path -> (size, atime)."""
    code, out, err = simulator.run_command(
        node=node, argv=["find", path, "-type", "f", "-printf", "%s %A@ %p\\n"]
    ).as_tuple()
    assert code == 0, err
    return {found.path: (found.size_bytes, found.atime) for found in parse_find_printf(out).files}


def proposed(policy, operator, run_shards) -> PolicyAction:
    survey = run_shards(policies.survey(policy=policy, user=operator))
    assert survey.status == "succeeded", survey.summary
    return policy.actions.get(state=ActionState.PROPOSED)


def test_the_survey_proposes_the_files_unread_for_the_age_and_the_saving(policy, fleet, operator, run_shards):
    before = listing(fleet, "/scratch")
    action = proposed(policy, operator, run_shards)

    now = timezone.now().timestamp()
    old = {path for path, (_, atime) in before.items() if now - atime >= 7 * DAY}
    assert old and {row["source"] for row in action.plan} == old  # exactly the files unread for 7 days
    assert all(row["destination"] == "/shared" + row["source"][len("/scratch") :] for row in action.plan)
    assert not any("/datasets/" in row["source"] for row in action.plan)  # read every epoch: stays hot
    moved = sum(row["size_bytes"] for row in action.plan)
    assert action.expected_kwh_per_day == pytest.approx(moved / 1e12 * (5.0 - 2.0) * 24 / 1000)
    assert action.hostnames == ["gpu001"] and "hot → warm" in action.reason
    lines = action.commands["gpu001"]
    assert lines[0].startswith("mkdir -p -- /shared/ckpt/") and any(line.startswith("mv -n -T -- ") for line in lines)


def test_a_longer_age_and_a_minimum_size_narrow_the_candidates(policy, fleet, operator, run_shards):
    policy.parameters = {**policy.parameters, "age_days": 30, "min_size_mb": 1000}
    policy.save()
    action = proposed(policy, operator, run_shards)

    now = timezone.now().timestamp()
    assert action.plan and all(now - row["atime"] >= 30 * DAY for row in action.plan)
    assert all(row["size_bytes"] >= 10**9 for row in action.plan)  # the notes (kB) are left


def test_open_files_and_a_running_jobs_newest_checkpoint_are_never_moved(policy, fleet, operator, run_shards):
    # A run checkpointing every two days (108,000 steps × 1.6 s), started 5.5 days ago: two saves, 3.5 and 1.5 days
    # ago; the newer one is what a restart loads, and its ranks hold it open.
    job = TrainingJob.objects.create(
        name="long-run",
        checkpoint_dir="/scratch/ckpt/long-run",
        checkpoint_interval_steps=108_000,
        log_path="/var/log/train/long-run.log",
        state=TrainingState.RUNNING,
        started_at=timezone.now() - dt.timedelta(days=5.5),
    )
    set_training_nodes(job=job, nodes=[fleet])
    policy.parameters = {**policy.parameters, "age_days": 1}
    policy.save()
    code, out, _ = simulator.run_command(node=fleet, argv=["lsof", "-w", "-F", "pcfn", "+D", "/scratch"]).as_tuple()
    assert code == 0 and "n/scratch/ckpt/long-run/step_0216000/__0_0.distcp" in out

    action = proposed(policy, operator, run_shards)

    sources = {row["source"] for row in action.plan}
    assert any(path.startswith("/scratch/ckpt/long-run/step_0108000/") for path in sources)  # the older one moves
    assert not any(path.startswith("/scratch/ckpt/long-run/step_0216000/") for path in sources)
    assert any("8 files left: a running process holds them open" in note for note in action.notes), action.notes


def test_a_running_jobs_newest_checkpoint_is_kept_even_where_lsof_sees_nothing_open(fleet):
    job = TrainingJob.objects.create(
        name="run", checkpoint_dir="/scratch/ckpt/run", state=TrainingState.RUNNING, log_path="/var/log/run.log"
    )
    set_training_nodes(job=job, nodes=[fleet])
    candidates = [f"/scratch/ckpt/run/step_{step:07d}/__0_0.distcp" for step in (1000, 2000, 3000)]

    assert in_use_checkpoints(fleet, "/scratch", candidates) == {"/scratch/ckpt/run/step_0003000"}
    assert in_use_checkpoints(fleet, "/shared", candidates) == set()  # its checkpoints are not under /shared
    job.state = TrainingState.COMPLETED
    job.save()
    assert in_use_checkpoints(fleet, "/scratch", candidates) == set()  # finished: nothing will load it


def test_apply_moves_the_files_with_a_manifest_and_revert_puts_them_back(policy, fleet, operator, run_shards):
    before, warm_before = listing(fleet, "/scratch"), listing(fleet, "/shared")
    action = proposed(policy, operator, run_shards)
    policies.approve(action=action, user=operator)
    action = policies.apply(action=action, user=operator)
    run_shards(action.apply_job)
    action.refresh_from_db()

    assert action.state == ActionState.APPLIED, action.message
    assert sorted(entry["source"] for entry in action.manifest) == sorted(row["source"] for row in action.plan)
    hot, warm = listing(fleet, "/scratch"), listing(fleet, "/shared")
    for entry in action.manifest:
        assert entry["source"] not in hot
        assert warm[entry["destination"]] == before[entry["source"]]  # same size, access time kept
    assert set(hot) == set(before) - {entry["source"] for entry in action.manifest}
    jobs = Job.objects.count()
    outcome = policies.evaluate(policy=policy)  # a move stays moved: nothing to re-apply, no second proposal
    action.refresh_from_db()
    assert action.state == ActionState.APPLIED and Job.objects.count() == jobs, outcome

    action = policies.revert(action=action, user=operator)
    run_shards(action.revert_job)
    action.refresh_from_db()

    assert action.state == ActionState.REVERTED and action.manifest == []
    assert listing(fleet, "/scratch") == before
    assert listing(fleet, "/shared") == warm_before
    audited = AuditEntry.objects.filter(object_id=str(action.pk)).values_list("action", flat=True)
    assert {"approve", "start"} <= set(audited)


def test_a_path_with_spaces_and_shell_metacharacters_stays_one_argv_element(policy, operator, run_shards):
    action = proposed(policy, operator, run_shards)
    row = next(row for row in action.plan if "$HOME" in row["source"])
    assert " " in row["source"] and '"' in row["source"] and ";" in row["source"] and "&" in row["source"]

    argv = move_argv(row["source"], row["destination"])
    assert argv[-2:] == [row["source"], row["destination"]] and argv[-3] == "--"
    assert shlex.split(shell_join(argv)) == argv  # what ssh sends: each element one word, nothing expanded
    line = next(line for line in action.commands["gpu001"] if line.startswith("mv ") and "$HOME" in line)
    assert shlex.split(line) == argv  # the line the operator approves is the same argv


def test_bad_parameters_answer_400_naming_the_field(fleet, api_as, operator):
    cases = [
        ({"node": "gpu999"}, "node"),
        ({"source_path": "/cold-nowhere"}, "source_path"),
        ({"source_path": "/scratch/a b"}, "source_path"),
        ({"source_path": "/checkpoints"}, "source_path"),  # the cold tier: nothing colder to move to
        ({"age_days": 0}, "age_days"),
        ({"min_size_mb": -1}, "min_size_mb"),
        ({"colour": "blue"}, "colour"),
    ]
    for change, field in cases:
        body = {"name": "t", "kind": "storage_tiering", "parameters": {**PARAMETERS, **change}}
        answer = api_as(operator).post(URL, body, format="json")
        assert answer.status_code == 400, change
        assert field in answer.json()["parameters"], answer.json()
    assert not CostPolicy.objects.exists()


def test_over_the_api_a_viewer_reads_but_cannot_survey_or_approve(fleet, api_as, viewer, operator, run_shards):
    created = api_as(operator).post(
        URL, {"name": "t", "kind": "storage_tiering", "parameters": PARAMETERS}, format="json"
    )
    assert created.status_code == 201, created.json()
    detail = f"{URL}{created.json()['id']}/"
    assert created.json()["parameters"]["age_days"] == 7
    assert api_as(viewer).post(f"{detail}survey/").status_code == 403
    early = api_as(operator).post(f"{detail}dry-run/")
    assert early.status_code == 400 and "survey" in early.json()["policy"][0]

    started = api_as(operator).post(f"{detail}survey/")
    assert started.status_code == 201
    run_shards(Job.objects.get(public_id=started.json()["id"]))
    actions = api_as(viewer).get("/api/policy-actions/", {"policy": "t"}).json()["results"]
    assert len(actions) == 1 and actions[0]["files"]["files"] == len(actions[0]["plan"]) > 0
    assert actions[0]["files"]["top_directories"][0]["directory"].startswith("/scratch/ckpt/")
    assert api_as(viewer).post(f"{detail}approve/", {}, format="json").status_code == 403
    assert api_as(operator).post(f"{detail}approve/", {}, format="json").json()["state"] == "approved"


def test_the_page_surveys_and_shows_the_files_summary_and_saving(policy, browser_as, operator, viewer, run_shards):
    survey = reverse("policy-step", args=[policy.public_id, "survey"])
    assert browser_as(viewer).post(survey).status_code == 403
    assert (
        'id="survey"' not in browser_as(viewer).get(reverse("policy-detail", args=[policy.public_id])).content.decode()
    )
    client = browser_as(operator)
    assert client.post(survey).status_code == 302
    run_shards(Job.objects.get(kind="storage-tiering"))
    action = policy.actions.get()

    shown = client.get(reverse("policy-detail", args=[policy.public_id])).content.decode()
    top = tiering_summary(action.plan)["top_directories"][0]["directory"]
    assert f"{len(action.plan)} files" in shown and top in shown and "kWh/day" in shown
    assert "mv -n -T -- " in shown
    answer = browser_as(viewer).post(
        reverse("policy-step", args=[policy.public_id, "approve"]), {"action": action.public_id}
    )
    assert answer.status_code == 403
    action.refresh_from_db()
    assert action.state == ActionState.PROPOSED


def test_the_evaluation_surveys_when_due_and_with_standing_approval_applies(policy, operator, run_shards):
    policy.standing_approval = True
    policy.save()
    outcome = policies.evaluate(policy=policy)
    assert "surveying" in outcome
    assert "surveying" not in policies.evaluate(policy=policy)  # one survey at a time
    survey = run_shards(Job.objects.get(kind="storage-tiering", parameters__mode="survey"))
    assert survey.status == "succeeded" and policy.actions.get().state == ActionState.PROPOSED

    outcome = policies.evaluate(policy=policy)

    action = policy.actions.get()
    assert "applying with standing approval" in outcome and action.state == ActionState.APPLYING
    assert action.approval == "standing" and action.apply_job.requested_by is None
    assert survey.requested_by is None  # the policy's own survey


def test_the_page_creates_a_tiering_policy_and_names_a_bad_field(fleet, browser_as, operator, viewer):
    url = reverse("policy-list")
    fields = {"kind": "storage_tiering", "storage_tiering-name": "hot-to-warm", "storage_tiering-node": "gpu001"}
    fields |= {"storage_tiering-source_path": "/checkpoints", "storage_tiering-age_days": 7}
    fields |= {"storage_tiering-min_size_mb": 0, "storage_tiering-max_files": 1000}
    assert browser_as(viewer).post(url, fields).status_code == 403
    client = browser_as(operator)
    refused = client.post(url, fields)
    assert refused.status_code == 200 and "is not on a hot or warm tier volume" in refused.content.decode()
    assert not CostPolicy.objects.exists()

    saved = client.post(url, {**fields, "storage_tiering-source_path": "/scratch/ckpt"})

    assert saved.status_code == 302
    policy = CostPolicy.objects.get()
    assert policy.kind == "storage_tiering" and policy.parameters["source_path"] == "/scratch/ckpt"
    assert policy.created_by == operator


def test_a_file_opened_since_the_proposal_is_left_at_apply_time():
    """The apply job's own lsof (check) wins over the proposal: an open file is neither stat'ed nor moved, and is
    named; leaving it is no failure."""
    kind = StorageTieringJob()
    kind.mode = "apply"
    kind.moves = [("/scratch/a b.pt", "/shared/a b.pt", 3), ("/scratch/open.pt", "/shared/open.pt", 5)]
    kind.open_now = {"/scratch/open.pt"}
    sizes = {"/scratch/a b.pt": 3, "/scratch/open.pt": 5}
    ran = []

    async def run(argv, timeout):
        ran.append(argv)
        if argv[0] == "mv":
            sizes[argv[-1]] = sizes.pop(argv[-2])
        if argv[0] == "find":
            size = sizes.get(argv[1])
            return CommandResult(exit_code=0 if size else 1, stdout=f"{size} 1.0 {argv[1]}\n".encode() if size else b"")
        return CommandResult(exit_code=0)

    result = asyncio.run(kind.step_runner(StepSpec(MOVE, ""))(NodeTarget("gpu001", "gpu001"), run))

    assert not any("/scratch/open.pt" in argv for argv in ran)
    assert ["mv", "-n", "-T", "--", "/scratch/a b.pt", "/shared/a b.pt"] in ran
    assert kind.done == [{"source": "/scratch/a b.pt", "destination": "/shared/a b.pt", "size_bytes": 3}]
    assert result.ok and kind.left == ["/scratch/open.pt: open now, left"]
