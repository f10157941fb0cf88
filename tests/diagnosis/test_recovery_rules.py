"""Runbook 3's pure rules: which checkpoints go when space must be freed, which one the job resumes from, the
nodes it runs on, the resume for each launcher, the routing between runbooks, and what the checks read."""

from apps.diagnosis import recovery
from apps.diagnosis.choices import Cause, EvidenceVerdict
from apps.diagnosis.recovery import CheckpointVerdict, JobFacts

JOB = JobFacts(
    name="llm",
    launcher="torchrun",
    hosts=("gpu001", "gpu002", "gpu003"),
    ranks_per_node=8,
    checkpoint_dir="/ckpt/llm",
    entrypoint="/workspace/pretrain_gpt.py",
    keep=3,
)


def _verdicts(**states):
    """step_<n>=valid | corrupt | incomplete."""
    return [
        CheckpointVerdict(int(key[5:]), f"/ckpt/llm/{key}", valid=state == "valid", incomplete=state == "incomplete")
        for key, state in states.items()
    ]


def _plan(**kwargs):
    arguments = {
        "job": JOB,
        "cause": Cause.CHECKPOINT_DISK_FULL,
        "steps": [100, 200, 300, 400, 500, 600],
        "verdicts": _verdicts(step_600="incomplete", step_500="corrupt", step_400="valid"),
        "disk_full": True,
        "bad_hosts": [],
        "spares": {},
        "rendezvous": "llm-r1",
    }
    return recovery.plan_recovery(**(arguments | kwargs))


def test_the_newest_valid_checkpoint_is_chosen_and_space_is_freed_from_the_oldest():
    plan = _plan()
    assert plan.resume_step == 400
    # keep 3 counts the chosen one: 400, 300, 200 stay; 100 and the unfinished 600 go; the corrupt 500 is kept.
    assert plan.removed == [100, 600]
    texts = [command.text() for command in plan.commands]
    assert texts[:2] == ["rm -rf -- /ckpt/llm/step_0000100", "rm -rf -- /ckpt/llm/step_0000600"]
    assert all("--ckpt-step 400" in text for text in texts[2:]) and len(texts) == 5


def test_nothing_is_removed_when_the_disk_is_not_full_and_nothing_runs_when_nothing_can_be_freed():
    assert _plan(disk_full=False).removed == []
    stuck = _plan(steps=[400], verdicts=_verdicts(step_400="valid"))
    assert stuck.removed == [] and stuck.commands == [] and "by hand" in stuck.summary


def test_no_valid_checkpoint_gives_no_plan():
    assert _plan(verdicts=_verdicts(step_600="incomplete", step_500="corrupt")) is None


def test_a_bad_node_is_replaced_by_its_spare_in_its_place_or_left_out():
    replaced = _plan(disk_full=False, bad_hosts=["gpu002"], spares={"gpu002": "gpu009"})
    assert replaced.hosts == ("gpu001", "gpu009", "gpu003") and replaced.replaced == {"gpu002": "gpu009"}
    assert [dict(c.values)["node_rank"] for c in replaced.commands if c.hostname == "gpu009"] == [1]
    fewer = _plan(disk_full=False, bad_hosts=["gpu001"])
    assert fewer.hosts == ("gpu002", "gpu003") and fewer.excluded == ["gpu001"]
    assert all("--nnodes 2" in c.text() and "--rdzv-endpoint gpu002:29500" in c.text() for c in fewer.commands)


def test_slurm_and_kubernetes_resumes_run_on_the_controller_or_are_shown_without_one():
    slurm_job = JobFacts(**{**JOB.__dict__, "launcher": "slurm"})
    alone = _plan(job=slurm_job, disk_full=False)
    assert alone.commands == [] and alone.artefact.startswith("sbatch --job-name llm --nodes 3")
    slurm = _plan(job=slurm_job, disk_full=False, controller="mgmt01", bad_hosts=["gpu002"])
    assert [c.text() for c in slurm.commands] == [
        "sbatch --job-name llm --nodes 2 --nodelist gpu001,gpu003 --ntasks-per-node 1 --gpus-per-node 8 "
        "--exclude gpu002 /workspace/pretrain_gpt.py --load /ckpt/llm --ckpt-step 400"
    ]
    assert {c.hostname for c in slurm.commands} == {"mgmt01"}
    k8s_job = JobFacts(**{**JOB.__dict__, "launcher": "kubernetes"})
    k8s = _plan(job=k8s_job, disk_full=False, controller="mgmt01")
    assert "kind: Job" in k8s.artefact and "completionMode: Indexed" in k8s.artefact
    assert '"--ckpt-step", "400"' in k8s.artefact and "- gpu002" in k8s.artefact
    assert [c.command for c in k8s.commands] == ["write-file", "kubectl-apply"]
    assert k8s.commands[1].text() == "kubectl apply -f /var/lib/rackpilot/resume/llm-r1.yaml"
    assert _plan(job=k8s_job, disk_full=False).commands == []  # no controller: shown for a person


def test_only_collective_timeouts_go_to_runbook_1_everything_else_to_runbook_3():
    assert recovery.route({"watchdog", "worker"}) == "nccl-timeout"
    assert recovery.route({"watchdog", "disk", "worker"}) == "training-interrupted"
    assert recovery.route({"watchdog", "cuda"}) == "training-interrupted"
    assert recovery.route({"worker"}) == "training-interrupted"


def test_df_and_a_checkpoints_files_are_read_as_the_tools_print_them():
    df = (
        "Filesystem             1-blocks         Used Available Capacity Mounted on\n"
        "ckpt-gw:/checkpoints 200000000000000 200000000000000 0 100% /checkpoints\n"
    )
    space = recovery.judge_space("gpu001", True, df, "df -P -B1 /ckpt/llm")
    assert space.verdict == EvidenceVerdict.FAULT and space.data["available"] == 0
    listing = (
        "total 8\n"
        "drwxr-xr-x 2 train train 4096 Dec  1 08:00 .\n"
        "drwxr-xr-x 3 train train 4096 Dec  1 08:00 ..\n"
        "-rw-r--r-- 1 train train 2151677952 Dec  1 08:00 __0_0.distcp\n"
        "-rw-r--r-- 1 train train          0 Dec  1 08:00 __1_0.distcp\n"
    )
    outputs = {
        "files:600": (True, listing, "ls -la /ckpt/llm/step_0000600"),
        "manifest:600": (False, "sha256sum: /ckpt/llm/step_0000600/SHA256SUMS: No such file or directory\n", "x"),
        "load:600": (
            False,
            "FileNotFoundError: [Errno 2] No such file or directory: '/ckpt/llm/step_0000600/.metadata'\n",
            "y",
        ),
    }
    verdict = recovery.judge_checkpoint("gpu001", 600, "/ckpt/llm/step_0000600", 3, outputs)
    assert not verdict.valid and verdict.incomplete
    shards = next(o for o in verdict.observations if o.check == "shards")
    assert shards.data["missing"] == [2] and shards.data["empty"] == ["__1_0.distcp"]
    assert recovery.checkpoint_steps("step_0000100\nstep_0000200\nlatest\n") == [100, 200]
