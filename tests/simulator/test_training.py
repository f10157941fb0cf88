"""The simulated training job: its log has the real tools' line shapes, follows from the seed, the time and the
faults, is read by the same parsers as real logs, and answers `tail`/`cat`/`ls` on the job's nodes."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.inventory.models import Node
from apps.parsers.training_log import parse_training_log
from apps.parsers.triage import triage
from apps.simulator import services as sim
from apps.simulator.models import SimChange, SimFault
from apps.simulator.training import RESTART_SECONDS, STARTUP_SECONDS, Disruption, TrainingRun, render_log
from tests.simulator.conftest import real

T0 = 1_800_000_000.0
RUN = TrainingRun(
    name="llm",
    hosts=("n1", "n2", "n3"),
    ranks_per_node=4,
    checkpoint_dir="/ckpt/llm",
    checkpoint_interval=100,
    seed=7,
    started=T0,
    log_path="/logs/llm.log",
)
PFC = Disruption(host="n2", kind="pfc_off", start=T0 + 600, links=((1, "mlx5_1", "10.1.1.12"),))


def _shape(line: str) -> str:
    """The line with its numbers and names taken out: what a real line and ours must share."""
    return re.sub(r"\d+", "N", re.sub(r"\[rank\d+\]:", "", line))


def test_watchdog_lines_have_the_real_shape():
    ours = render_log(RUN, "n2", [PFC], T0 + 1300).splitlines()
    theirs = real(
        "pytorch-nccl/watchdog-allreduce-timeout-600000ms-exception-detected-pg-guid-default-pg-basicsr-issue737-partial.txt"
    ).splitlines()
    caught = next(line for line in ours if "Watchdog caught" in line)
    detected = next(line for line in ours if "detected by watchdog" in line)
    assert _shape(caught).replace("OpType=ALLREDUCE", "") == _shape(theirs[0]).replace("OpType=ALLREDUCE", "")
    assert _shape(detected) == _shape(theirs[1])


def test_a_network_fault_hangs_the_run_and_the_faulty_node_lags():
    before = render_log(RUN, "n1", [PFC], T0 + 600 + 599)
    assert "Watchdog" not in before  # the collective hangs; the timeout has not passed yet
    log = parse_training_log(render_log(RUN, "n2", [PFC], T0 + 1300))
    assert {t.rank for t in log.timeouts} == {4, 5, 6, 7} and log.lagging_ranks == []  # alone, no one is behind
    enqueued = {
        t.rank: t.last_enqueued
        for host in RUN.hosts
        for t in parse_training_log(render_log(RUN, host, [PFC], T0 + 1300)).timeouts
    }
    assert len(enqueued) == 12  # every rank's watchdog fired
    assert sorted(rank for rank, work in enqueued.items() if work == min(enqueued.values())) == [4, 5, 6, 7]
    problems = {finding.problem for finding in triage(render_log(RUN, "n2", [PFC], T0 + 1300)).findings}
    assert {"nccl_watchdog_timeout", "nccl_ib_error", "worker_failed"} <= problems


def test_the_same_seed_gives_the_same_log_and_another_seed_other_figures():
    first = render_log(RUN, "n1", [PFC], T0 + 1300)
    assert first == render_log(RUN, "n1", [PFC], T0 + 1300)
    other = render_log(TrainingRun(**{**RUN.__dict__, "seed": 8}), "n1", [PFC], T0 + 1300)
    assert other != first and other.count("iteration ") == first.count("iteration ")  # noise, not events


def test_after_the_fix_the_run_resumes_from_the_newest_checkpoint():
    fixed = Disruption(**{**PFC.__dict__, "end": T0 + 1500})
    log = render_log(RUN, "n1", [fixed], T0 + 1500 + RESTART_SECONDS + STARTUP_SECONDS + 60)
    run = parse_training_log(log)
    assert run.attempts == 2 and run.steps_since_start > 0 and not run.timeouts
    failed_at_step = int((600 - STARTUP_SECONDS) // RUN.step_seconds)
    assert f"at iteration {failed_at_step // 100 * 100}" in log  # loads the newest checkpoint before the failure


def test_a_hang_shorter_than_the_timeout_only_slows_one_step():
    brief = Disruption(**{**PFC.__dict__, "end": T0 + 660})
    log = render_log(RUN, "n1", [brief], T0 + 900)
    assert "Watchdog" not in log and "Starting worker group (attempt 1)" not in log
    assert parse_training_log(log).last_step >= (900 - STARTUP_SECONDS - 60) // RUN.step_seconds // 10 * 10


def test_xid79_kills_its_rank_with_a_cuda_error_and_the_others_time_out():
    lost = Disruption(host="n3", kind="xid79", start=T0 + 600, target="2", links=((2, "", ""),))
    log = "".join(render_log(RUN, host, [lost], T0 + 1300) for host in RUN.hosts)
    assert "[rank10]: RuntimeError: CUDA error: unspecified launch failure" in log
    assert 10 not in {t.rank for t in parse_training_log(log).timeouts}
    assert any(f.problem == "cuda_error" and f.rank == 10 for f in triage(log).findings)


def test_a_full_checkpoint_volume_fails_the_next_save():
    full = Disruption(host="n1", kind="disk_full", start=T0 + 100, target="/ckpt")
    log = render_log(RUN, "n1", [full], T0 + 400)
    # A DCP save: the first rank of the full host cannot write its shard (node rank 0's first rank is rank 0).
    assert "OSError: [Errno 28] No space left on device: '/ckpt/llm/step_0000100/__0_0.distcp'" in log
    problems = {finding.problem for finding in triage(log).findings}
    assert {"disk_full", "worker_failed"} <= problems


@pytest.fixture
def running(clock, demo_cluster):
    """A job 40 minutes in, on the clock the test sets (`clock`, set before the cluster is loaded): its log is read
    at that clock, so what it shows does not depend on how long the test takes."""
    from apps.diagnosis.simulation import training_run  # noqa: F401  (the source the diagnosis app registers)
    from apps.workloads.choices import TrainingState
    from apps.workloads.models import TrainingJob, TrainingJobNode

    job = TrainingJob.objects.create(
        name="tiny",
        ranks_per_node=8,
        checkpoint_dir="/checkpoints/tiny",
        checkpoint_interval_steps=100,
        log_path="/var/log/train/tiny.log",
        state=TrainingState.RUNNING,
        started_at=timezone.now() - timedelta(minutes=40),
    )
    for rank, hostname in enumerate(("gpu005", "gpu006")):
        TrainingJobNode.objects.create(job=job, node=Node.objects.get(hostname=hostname), node_rank=rank)
    return job


@pytest.mark.django_db
def test_the_nodes_answer_tail_cat_and_ls_of_the_job(running):
    node = Node.objects.get(hostname="gpu005")
    tail = sim.run_command(node=node, argv=["tail", "-n", "3", running.log_path])
    assert tail.exit_code == 0 and len(tail.stdout.splitlines()) == 3 and "iteration" in tail.stdout
    whole = sim.run_command(node=node, argv=["cat", running.log_path]).stdout
    assert whole.endswith(tail.stdout) and "Starting worker group (attempt 0)" in whole
    listing = sim.run_command(node=node, argv=["ls", running.checkpoint_dir]).stdout.split()
    assert listing[:2] == ["step_0000100", "step_0000200"]  # one checkpoint directory per save
    missing = sim.run_command(node=node, argv=["tail", "-n", "3", "/var/log/train/other.log"])
    assert missing.exit_code == 1 and "No such file or directory" in missing.stderr
    assert "iteration" not in sim.run_command(node=node, argv=["tail", running.log_path]).stderr


@pytest.mark.django_db
def test_a_fault_injected_on_a_peer_and_its_repair_show_in_the_log(running):
    peer = Node.objects.get(hostname="gpu006")
    fault = sim.inject_fault(node=peer, kind="mtu", target="ens2np0")
    SimFault.objects.filter(pk=fault.pk).update(created=timezone.now() - timedelta(minutes=20))
    node = Node.objects.get(hostname="gpu005")
    hung = parse_training_log(sim.run_command(node=node, argv=["cat", running.log_path]).stdout)
    assert hung.timeouts and hung.attempts == 1
    sim.run_command(node=peer, argv=["ip", "link", "set", "dev", "ens2np0", "mtu", "9000"])
    SimChange.objects.filter(node=peer).update(updated=timezone.now() - timedelta(minutes=5))
    resumed = parse_training_log(sim.run_command(node=node, argv=["cat", running.log_path]).stdout)
    assert resumed.attempts == 2 and resumed.steps_since_start > 0 and not resumed.timeouts


@pytest.mark.django_db
def test_ethtool_statistics_have_the_real_layout_and_show_pfc_off(demo_cluster):
    node = Node.objects.get(hostname="gpu007")
    theirs = real("network/ethtool-S-mlx5-connectx4-first-lines-partial-ethq-issue8.txt").splitlines()
    healthy = sim.run_command(node=node, argv=["ethtool", "-S", "ens1np0"]).stdout.splitlines()
    assert healthy[0] == theirs[0] == "NIC statistics:"
    assert [_shape(line).split(":")[0][:5] for line in healthy[1:3]] == ["     ", "     "]
    assert healthy[1:5] == [line.split(":")[0] + ": " + line.split(": ")[1] for line in healthy[1:5]]
    assert [line.split(":")[0] for line in healthy[1:5]] == [line.split(":")[0] for line in theirs[1:5]]
    assert "     rx_discards_phy: 0" in healthy
    sim.inject_fault(node=node, kind="pfc_off", target="3")
    faulty = sim.run_command(node=node, argv=["ethtool", "-S", "ens1np0"]).stdout
    assert "     rx_prio3_pause: 0" in faulty and "     rx_discards_phy: 0" not in faulty


def _age(fault, minutes):
    SimFault.objects.filter(pk=fault.pk).update(created=timezone.now() - timedelta(minutes=minutes))


@pytest.mark.django_db
def test_a_checkpoint_is_a_dcp_directory_with_marker_and_manifest(running):
    node = Node.objects.get(hostname="gpu005")
    path = f"{running.checkpoint_dir}/step_0000200"
    listing = sim.run_command(node=node, argv=["ls", "-la", path]).stdout.splitlines()
    assert listing[0].startswith("total ") and listing[1].endswith(" .") and listing[2].endswith(" ..")
    names = [line.split()[-1] for line in listing[3:]]
    assert names[:3] == [".metadata", "SHA256SUMS", "__0_0.distcp"] and "__15_0.distcp" in names
    check = sim.run_command(node=node, argv=["sha256sum", "-c", f"{path}/SHA256SUMS"])
    assert check.exit_code == 0 and check.stdout.splitlines()[0] == f"{path}/__0_0.distcp: OK"
    assert len(check.stdout.splitlines()) == 17  # 16 shards and the marker
    fault = sim.inject_fault(node=node, kind="corrupt_checkpoint", target=f"{path}/__3_0.distcp")
    _age(fault, 1)
    check = sim.run_command(node=node, argv=["sha256sum", "-c", f"{path}/SHA256SUMS"])
    assert check.exit_code == 1 and f"{path}/__3_0.distcp: FAILED" in check.stdout
    assert check.stderr == "sha256sum: WARNING: 1 computed checksum did NOT match\n"
    from apps.nodeexec.catalogue import CHECKPOINT_LOAD_SCRIPT

    load = sim.run_command(node=node, argv=["python3", "-c", CHECKPOINT_LOAD_SCRIPT, path])
    assert load.exit_code == 1 and load.stderr.splitlines()[-1] == (
        "RuntimeError: PytorchStreamReader failed reading zip archive: failed finding central directory"
    )
    good = sim.run_command(
        node=node, argv=["python3", "-c", CHECKPOINT_LOAD_SCRIPT, f"{running.checkpoint_dir}/step_0000100"]
    )
    assert good.exit_code == 0 and good.stdout.startswith(f"loaded {running.checkpoint_dir}/step_0000100: ")


@pytest.mark.django_db
def test_df_of_a_path_and_rm_of_old_checkpoints_free_a_full_volume(running):
    node = Node.objects.get(hostname="gpu005")
    _age(sim.inject_fault(node=node, kind="disk_full", target="/checkpoints"), 30)
    df = sim.run_command(node=node, argv=["df", "-P", "-B1", running.checkpoint_dir]).stdout.splitlines()
    assert (
        len(df) == 2 and df[0].startswith("Filesystem") and df[1].split()[3] == "0" and df[1].endswith("/checkpoints")
    )
    removed = sim.run_command(node=node, argv=["rm", "-rf", "--", f"{running.checkpoint_dir}/step_0000100"])
    assert removed.exit_code == 0 and removed.stdout == removed.stderr == ""
    assert "step_0000100" not in sim.run_command(node=node, argv=["ls", running.checkpoint_dir]).stdout
    free = int(sim.run_command(node=node, argv=["df", "-P", "-B1", running.checkpoint_dir]).stdout.split()[-3])
    assert free == 16 * (2_147_483_648 + 4_194_304) + 1_843_200 + len(
        "".join(f"{'0' * 64}  {running.checkpoint_dir}/step_0000100/__{rank}_0.distcp\n" for rank in range(16))
        + f"{'0' * 64}  {running.checkpoint_dir}/step_0000100/.metadata\n"
    )
    missing = sim.run_command(node=node, argv=["rm", "-r", f"{running.checkpoint_dir}/step_0009900"])
    assert missing.exit_code == 1 and "No such file or directory" in missing.stderr


@pytest.mark.django_db
def test_torchrun_under_systemd_run_on_every_node_resumes_the_run(running):
    hosts = ("gpu005", "gpu006")
    first = Node.objects.get(hostname="gpu005")
    _age(sim.inject_fault(node=first, kind="disk_full", target="/checkpoints"), 30)  # the save after 10 min fails
    sim.run_command(node=first, argv=["rm", "-rf", "--", f"{running.checkpoint_dir}/step_0000100"])
    for rank, host in enumerate(hosts):
        argv = ["systemd-run", "--unit", "resume-tiny", "--collect", "torchrun", "--nnodes", "2",
                "--nproc-per-node", "8", "--node-rank", str(rank), "--rdzv-id", "tiny-r1", "--rdzv-backend", "c10d",
                "--rdzv-endpoint", "gpu005:29500", "/workspace/pretrain_gpt.py", "--load", running.checkpoint_dir,
                "--ckpt-step", "200"]  # fmt: skip
        out = sim.run_command(node=Node.objects.get(hostname=host), argv=argv)
        assert out.exit_code == 0 and out.stderr.startswith("Running as unit: resume-tiny.service; invocation ID: ")
    SimChange.objects.update(updated=timezone.now() - timedelta(minutes=5))
    log = sim.run_command(node=Node.objects.get(hostname="gpu005"), argv=["cat", running.log_path]).stdout
    run = parse_training_log(log)
    assert run.attempts == 2 and run.resumed_from == 200 and run.last_step > 200
    bad = sim.run_command(node=Node.objects.get(hostname="gpu005"), argv=["systemd-run", "bash", "-c", "id"])
    assert bad.exit_code == 1 and "only torchrun" in bad.stderr
