"""Every problem key the rules can emit is a Problem with advice, and no Problem is advice for nothing."""

from apps.diagnosis.choices import ADVICE, Problem
from apps.parsers import triage as rules


def test_every_problem_the_rules_emit_is_a_member_with_advice():
    assert set(rules.PROBLEMS) == set(Problem.values)
    for problem in Problem:
        advice = ADVICE[problem]
        assert problem.label and advice.explanation and advice.runbook and advice.next_step
        assert "\n" not in advice.explanation  # one line


def test_the_issue_s_problem_keys_are_all_there():
    required = {
        "nccl_watchdog_timeout",
        "nccl_remote_error",
        "nccl_ib_error",
        "nccl_socket_error",
        "nccl_internal_error",
        "nccl_system_error",
        "cuda_error",
        "xid",
        "gpu_fell_off_bus",
        "ecc_uncorrectable",
        "row_remap",
        "pcie_aer",
        "oom",
        "disk_full",
        "checkpoint_corrupt",
        "worker_failed",
    }
    assert required <= set(Problem.values)


def test_docs_describe_every_problem_key():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "diagnosis.md").read_text()
    assert [key for key in Problem.values if f"`{key}`" not in text] == []
