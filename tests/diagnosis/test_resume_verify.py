"""The re-check after a checkpoint resume polls node rank 0's log until it shows the resume from the planned step:
a read right after the relaunch that still ends with the stopped attempt's steps is not "training moves"."""

from apps.diagnosis.choices import EvidenceVerdict
from apps.diagnosis.kinds.training_interrupted import training_moves
from apps.diagnosis.recovery import judge_log

BEFORE = "\n".join(
    f" [2026-12-05 14:4{i}:00] iteration  {1620990 + 10 * i}/ 5000000 | elapsed time per iteration (ms): 1600.0 |"
    for i in range(3)
)
RELAUNCH = (
    "W1205 14:50:18.765998824 41320 torch/distributed/elastic/agent/server/api.py:704] Received Signals.SIGTERM "
    "death signal, shutting down workers\n"
    "I1205 14:50:18.765998824 42270 torch/distributed/elastic/agent/server/api.py:525] [default] Starting worker group "
    "(attempt 1): rdzv_endpoint=gpu005:29500, nnodes=16, nproc_per_node=8\n"
    " loading checkpoint from /shared/ckpt/llama-pretrain at iteration 1621000\n"
    "  successfully loaded checkpoint from /shared/ckpt/llama-pretrain/step_1621000 [ t 1/1, p 1/1 ] at iteration "
    "1621000\n"
    " [2026-12-05 14:51:19] iteration  1621010/ 5000000 | elapsed time per iteration (ms): 1625.1 |\n"
    " [2026-12-05 14:51:35] iteration  1621020/ 5000000 | elapsed time per iteration (ms): 1622.5 |"
)


def _seen(text: str):
    return judge_log("gpu005", text + "\n", "tail -n 2000 /var/log/train/llama-pretrain.log")


def test_the_stopped_attempts_steps_are_not_the_resume():
    seen = _seen(BEFORE)
    assert any(o.check == "progress" and o.verdict == EvidenceVerdict.HEALTHY for o in seen)  # it steps, but
    assert not training_moves(seen, resume_step=1621000)  # not from the planned checkpoint: poll again
    assert training_moves(seen, resume_step=None)  # a re-check with no resume planned takes any progress


def test_the_resume_from_the_planned_step_with_steps_after_it_moves():
    seen = _seen(BEFORE + "\n" + RELAUNCH)
    assert training_moves(seen, resume_step=1621000)
    assert not training_moves(seen, resume_step=1620000)  # another checkpoint was chosen: not this one
