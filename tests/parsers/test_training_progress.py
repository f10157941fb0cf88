"""parse_progress: the step lines of real training logs (DeepSpeed, detectron2) and Megatron-LM's iteration lines."""

from datetime import UTC, datetime

import pytest

from apps.parsers.training_log import parse_checkpoint_saves, parse_progress
from tests.parsers.helpers import real

DEEPSPEED = (
    "training-logs/deepspeed-chat-step1-sft-opt-1.3b-16rank-zero2-full-run-fp16-overflow-steps-saving-final-model-"
    "exit.log"
)
DETECTRON = (
    "training-logs/detectron2-iter-events-then-saving-checkpoint-model_0004999-then-exception-during-training-8gpu-"
    "diffusiondet-issue39-partial.txt"
)
MEGATRON = (
    " [2026-12-01 06:24:44] iteration     1200/  500000 | consumed samples:       614400 | elapsed time per iteration "
    "(ms): 1600.0 | learning rate: 3.000000E-04 | global batch size:   512 | lm loss: 2.345678E+00 | loss scale: 1.0 "
    "| grad norm: 0.812 | number of skipped iterations:   0 | number of nan iterations:   0 |"
)


def test_deepspeed_step_and_timer_lines_make_one_point_a_step():
    points = parse_progress(real(DEEPSPEED))

    assert len(points) == 736 and [p.step for p in points[:3]] == [10, 20, 30]
    first = points[0]
    assert first.at == datetime(2023, 4, 18, 1, 46, 59, 142000, tzinfo=UTC)  # the log_dist line's stamp
    assert first.learning_rate == pytest.approx(9.649992967150629e-06)
    assert first.samples_per_second == pytest.approx(171.97903593624417)  # CurrSamplesPerSec of the timer line
    assert first.loss is None  # DeepSpeed-Chat prints perplexity per epoch, not a loss per step
    assert points[-1].step == 7360 and points[-1].learning_rate == pytest.approx(8.490116182110961e-09)
    assert all(p.samples_per_second for p in points)


def test_detectron2_event_lines_take_their_year_from_the_reading_time():
    text = real(DETECTRON)

    read_in_january = parse_progress(text, now=datetime(2024, 1, 5, tzinfo=UTC))
    undated = parse_progress(text)

    assert [(p.step, p.loss, p.learning_rate, p.seconds_per_step) for p in read_in_january] == [
        (4959, 10.31, 2.5e-05, 0.2815),
        (4979, 9.924, 2.5e-05, 0.2814),
    ]
    assert read_in_january[0].at == datetime(2023, 12, 20, 18, 16, 9, tzinfo=UTC)  # December: the year before
    assert [p.at for p in undated] == [None, None]  # no year in the stamp, none to guess from


def test_megatron_iteration_lines_give_loss_rate_and_learning_rate():
    (point,) = parse_progress(MEGATRON)

    assert (point.step, point.loss, point.learning_rate) == (1200, 2.345678, 3e-4)
    assert point.samples_per_second == pytest.approx(320.0) and point.seconds_per_step == pytest.approx(1.6)
    assert point.at == datetime(2026, 12, 1, 6, 24, 44, tzinfo=UTC)


def test_a_step_run_again_after_a_restart_keeps_the_newer_line():
    rerun = MEGATRON.replace("06:24:44", "07:10:00").replace("2.345678E+00", "2.340000E+00")

    (point,) = parse_progress(f"{MEGATRON}\nStarting worker group (attempt 1)\n{rerun}\n")

    assert point.loss == 2.34 and point.line == 3


def test_lines_without_steps_give_nothing():
    assert (
        parse_progress(
            real(
                "training-logs/hf-trainer-resume-continuing-from-global-step-200000-will-skip-batches-tqdm-llamafactory-issue1813.txt"
            )
        )
        == []
    )
    assert parse_progress("") == []
    assert parse_progress(MEGATRON.replace("lm loss: 2.345678E+00", "lm loss: nan"))[0].loss is None


def test_checkpoint_saves_are_read_in_the_order_written_and_a_failed_save_gives_none():
    text = (
        " saving checkpoint at iteration    2000 to /ckpt/llama\n"
        "  successfully saved checkpoint from iteration    2000 to /ckpt/llama [ t 1/1, p 1/1 ]\n"
        " [2026-12-01 06:24:44] iteration     2010/  500000 | elapsed time per iteration (ms): 1603.2 |\n"
        " saving checkpoint at iteration    2200 to /ckpt/llama\n"
        "[rank8]: OSError: [Errno 28] No space left on device: '/ckpt/llama/step_0002200/__8_0.distcp'\n"
        "  successfully saved checkpoint from iteration    1800 to /ckpt/llama/step_0001800\n"
    )
    saves = parse_checkpoint_saves(text)
    found = [(save.step, save.path, save.line) for save in saves]
    assert found == [(2000, "/ckpt/llama", 2), (1800, "/ckpt/llama/step_0001800", 6)]
    assert parse_checkpoint_saves(" [2026-12-01 06:24:44] iteration 10/ 100 |\n") == []
