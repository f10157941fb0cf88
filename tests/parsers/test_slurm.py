"""Slurm's `scontrol show` records: the real `show node` capture (a value with spaces, a whitespace-only line inside
the record), `show job -d` with its per-node CPU and GPU binding, and host lists."""

import pytest

from apps.parsers.errors import ParseError
from apps.parsers.slurm import expand_hostlist, expand_ranges, parse_records, parse_show_job

from .helpers import assert_parse_error, data, real

NODE = "slurm/scontrol-show-node-idle-drain-gres-gpu-count-reported-lower-than-configured-rtx3090-slurm24.05-awsome-distributed-ai-issue195.txt"  # noqa: E501
JOBS = "scontrol-show-job-d-two-jobs-sharing-a-node.txt"


def test_the_real_show_node_capture_is_one_record_with_values_holding_spaces():
    (record,) = parse_records(real(NODE))
    fields = record.fields
    assert record.kind == "NodeName" and fields["NodeName"] == "yigou-dev-102-68"
    assert fields["State"] == "IDLE+DRAIN" and fields["Gres"] == "gpu:nvidia-rtx-3090:1"
    assert fields["Reason"] == "gres/gpu count reported lower than configured (0 < 1) [slurm@2024-12-19T11:03:34]"
    assert fields["OS"].startswith("Linux 5.10.0-153") and fields["OS"].endswith("CST 2023")
    assert fields["CfgTRES"] == "cpu=8,mem=1M,billing=8,gres/gpu=1" and fields["AllocTRES"] == ""
    assert (record.line, record.end) == (1, 17)


def test_show_job_d_gives_the_node_list_the_binding_per_node_and_oversubscribe():
    listing = parse_show_job(data(JOBS))
    pretrain, finetune, pending = listing.jobs
    assert (pretrain.job_id, pretrain.name, pretrain.user, pretrain.state) == (
        "48213",
        "llm-pretrain",
        "train",
        "RUNNING",
    )
    assert pretrain.nodes == ["gpu001", "gpu002", "gpu003", "gpu010"] and not pretrain.exclusive
    assert pretrain.on("gpu010").cpu_ids == "0-111" and pretrain.on("gpu010").gpus == list(range(8))
    assert pretrain.on("gpu003").cpu_ids == "0-83" and pretrain.on("gpu003").line == 16
    assert finetune.on("gpu003").gpus == [] and finetune.on("gpu003").gres == ""
    assert [job.name for job in listing.on_node("gpu003")] == ["llm-pretrain", "finetune-7b"]
    assert pending.nodes == [] and pending.exclusive and pending.state == "PENDING"
    assert (pretrain.line, finetune.line, pending.line) == (1, 22, 29)
    assert listing.named("finetune-7b") == [finetune]
    assert json_ready(listing.to_dict())


def json_ready(value) -> bool:
    import json

    return json.loads(json.dumps(value)) == value


def test_no_jobs_and_not_scontrol():
    assert parse_show_job("No jobs in the system\n").jobs == []
    assert_parse_error(parse_show_job, "JobId=1 JobName=a\nNodeList=gpu001\n", 2, "not an scontrol record line")
    assert_parse_error(parse_show_job, "   NodeList=gpu001\n", 1, "not an scontrol record line")
    assert_parse_error(parse_show_job, real(NODE), 1, "a NodeName record in a job listing")


@pytest.mark.parametrize(
    ("text", "hosts"),
    [
        ("gpu[001-003,007],mgmt01", ["gpu001", "gpu002", "gpu003", "gpu007", "mgmt01"]),
        ("gpu003", ["gpu003"]),
        ("rack[1-2]-n[08-09]", ["rack1-n08", "rack1-n09", "rack2-n08", "rack2-n09"]),
        ("(null)", []),
    ],
)
def test_host_lists_expand_as_slurm_writes_them(text, hosts):
    assert expand_hostlist(text) == hosts


def test_ranges_expand_and_bad_ones_are_refused():
    assert expand_ranges("0-3,8,10-11") == [0, 1, 2, 3, 8, 10, 11]
    with pytest.raises(ParseError):
        expand_ranges("0-x")
