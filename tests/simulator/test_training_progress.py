"""The simulated training log's step lines as the progress parser reads them: loss from the model's decaying curve
with seeded noise, Megatron's learning-rate schedule, and a run that resumes from its checkpoint carrying on from
the loss of the step it loaded (no database)."""

from dataclasses import replace

import pytest

from apps.parsers.training_log import parse_progress
from apps.simulator.training import (
    LOSS_NOISE,
    RESTART_SECONDS,
    STARTUP_SECONDS,
    Disruption,
    TrainingRun,
    expected_loss,
    learning_rate,
    render_log,
)

T0 = 1_800_000_000.0
RUN = TrainingRun(
    name="llm",
    hosts=("n1", "n2"),
    ranks_per_node=4,
    checkpoint_dir="/ckpt/llm",
    checkpoint_interval=100,
    seed=7,
    started=T0,
    log_path="/logs/llm.log",
)


def test_loss_follows_the_model_and_the_learning_rate_warms_up():
    points = parse_progress(render_log(RUN, "n1", [], T0 + STARTUP_SECONDS + 1600 * RUN.step_seconds))

    assert [p.step for p in points] == list(range(10, 1601, 10))
    assert all(abs(p.loss - expected_loss(p.step)) <= LOSS_NOISE + 1e-6 for p in points)
    assert points[0].loss > points[-1].loss + 2  # 10.5 at the start, ~7.7 by step 1600
    assert [p.learning_rate for p in points[:3]] == pytest.approx([learning_rate(RUN, s) for s in (10, 20, 30)])
    assert points[-1].learning_rate < learning_rate(RUN, 2000) == pytest.approx(3e-4)  # still warming up
    assert all(p.samples_per_second == pytest.approx(512 / RUN.step_seconds, rel=0.03) for p in points)


def test_the_same_seed_prints_the_same_losses_and_another_seed_other_ones():
    t = T0 + STARTUP_SECONDS + 200 * RUN.step_seconds
    first = [p.loss for p in parse_progress(render_log(RUN, "n1", [], t))]

    assert first == [p.loss for p in parse_progress(render_log(RUN, "n1", [], t))]
    assert first != [p.loss for p in parse_progress(render_log(replace(RUN, seed=8), "n1", [], t))]


def test_after_a_repaired_fault_the_run_resumes_from_its_checkpoint_and_its_loss():
    # A NIC down on n2 at step ~312 for 20 minutes: the watchdog fires, the agents restart from step 300.
    start = T0 + STARTUP_SECONDS + 312.5 * RUN.step_seconds
    fault = Disruption(host="n2", kind="nic_down", start=start, end=start + 1200, links=((0, "mlx5_0", "10.1.1.2"),))
    t = start + 1200 + RESTART_SECONDS + STARTUP_SECONDS + 100 * RUN.step_seconds
    text = render_log(RUN, "n1", [fault], t)

    lines = [line for line in text.splitlines() if " iteration " in line and "| consumed samples" in line]
    steps = [int(line.split("iteration")[1].split("/")[0]) for line in lines]
    resumed_at = next(i for i in range(1, len(steps)) if steps[i] <= steps[i - 1])
    assert steps[resumed_at - 1] == 310 and steps[resumed_at] == 310  # re-runs from the checkpoint of step 300
    points = parse_progress(text)
    by_step = {p.step: p for p in points}
    assert max(by_step) == steps[-1] > 310
    assert by_step[310].at.timestamp() > start + 1200  # the re-run's line replaced the first run's
    assert all(abs(p.loss - expected_loss(p.step)) <= LOSS_NOISE + 1e-6 for p in points)


def test_a_month_long_run_is_still_training_and_its_tail_is_the_end_of_the_whole_log():
    """The demo's job has a month of history (~1.6 million steps): the tail `tail -n` reads is the whole log's end,
    through a repaired fault and its restart, and the run has not reached its last iteration."""
    start = T0 + STARTUP_SECONDS + 312.5 * RUN.step_seconds
    fault = Disruption(host="n2", kind="nic_down", start=start, end=start + 1200, links=((0, "mlx5_0", "10.1.1.2"),))
    t = start + 1200 + RESTART_SECONDS + STARTUP_SECONDS + 100 * RUN.step_seconds
    for host in ("n1", "n2"):
        whole = render_log(RUN, host, [fault], t)
        assert render_log(RUN, host, [fault], t, last=50) == "".join(whole.splitlines(keepends=True)[-50:])
    month = T0 + 30 * 86400
    newest = parse_progress(render_log(RUN, "n1", [], month, last=20))[-1]
    assert newest.step == int((30 * 86400 - STARTUP_SECONDS) / RUN.step_seconds) // 10 * 10
    assert newest.step < RUN.train_iters
