"""Slurm's `scontrol show` records: the real `show node` capture (a value with spaces, a whitespace-only line inside
the record), `show job -d` with its per-node CPU and GPU binding, and host lists."""

import pytest

from apps.parsers.errors import ParseError
from apps.parsers.slurm import (
    expand_hostlist,
    expand_ranges,
    parse_records,
    parse_show_job,
    parse_show_nodes,
    parse_sinfo_nodes,
)

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


# --- node states, as a real Debian 22.05.8 slurmctld printed them (tests/fixtures/real/SOURCES.md) ------------------

SINFO = "slurm/sinfo-N-drained-reboot-unknown-debian-slurm22.05.8-private-slurmctld.txt"
SHOW_O = "slurm/scontrol-show-node-o-drain-reboot-requested-debian-slurm22.05.8-private-slurmctld.txt"
SHOW_ONE = "slurm/scontrol-show-node-drain-reason-with-equals-and-bar-debian-slurm22.05.8-private-slurmctld.txt"


def test_sinfo_gives_each_nodes_state_and_the_reason_whole_even_with_the_separator_inside():
    nodes = parse_sinfo_nodes(real(SINFO)).by_name()
    assert nodes["gpu-a001"].drain_state == "DRAINED"
    assert nodes["gpu-a001"].reason == "xid 79 on GPU 3: fell off the bus"
    assert (nodes["gpu-a001"].reason_user, nodes["gpu-a001"].reason_time) == ("root", "2026-12-05T08:00:31")
    assert nodes["gpu-a002"].reason == "link=200Gb/s | expected 400"
    assert nodes["gpu-a003"].state == "REBOOT" and "REBOOT_REQUESTED" in nodes["gpu-a003"].flags
    fresh = nodes["gpu-a004"]  # sinfo prints the user even where no reason is set: not taken for one
    assert (fresh.state, fresh.reason, fresh.reason_user, fresh.drained) == ("UNKNOWN", "", "", False)


def test_sinfo_flags_after_the_state_are_read_and_a_node_in_two_partitions_counts_once():
    text = (
        "gpu1|draining*|2026-01-02T03:04:05|slurm|Kill task failed\n"
        "gpu1|draining*|x|y|z\n"
        "gpu2|mixed@|Unknown|root|none\n"
    )
    first, second = parse_sinfo_nodes(text).nodes
    assert (first.state, first.flags, first.drain_state) == ("DRAINING", ["DRAIN", "NOT_RESPONDING"], "DRAINING")
    assert (second.state, second.flags, second.drained) == ("MIXED", ["REBOOT_REQUESTED"], False)


def test_sinfo_refuses_other_output_naming_the_line():
    assert_parse_error(parse_sinfo_nodes, "gpu1|idle|Unknown|root|none\nNODELIST STATE\n", 2, "expected NODE|STATE")


def test_scontrol_oneliner_splits_state_and_flags_and_reads_the_reason_up_to_its_stamp():
    nodes = parse_show_nodes(real(SHOW_O)).by_name()
    rebooting = nodes["gpu-a003"]
    assert (rebooting.state, rebooting.flags) == ("UNKNOWN", ["DRAIN", "REBOOT_REQUESTED"])
    assert rebooting.drain_state == "DRAINED" and rebooting.reason == "firmware 2.1"
    assert nodes["gpu-a002"].reason == "link=200Gb/s | expected 400"
    assert nodes["gpu-a002"].reason_time == "2026-12-05T08:00:31" and nodes["gpu-a002"].reason_user == "root"
    assert (nodes["gpu-a004"].state, nodes["gpu-a004"].flags, nodes["gpu-a004"].reason) == ("UNKNOWN", [], "")


def test_scontrol_multiline_records_read_the_same_as_the_oneliner():
    (one,) = parse_show_nodes(real(SHOW_ONE)).nodes
    assert (one.name, one.flags, one.reason) == ("gpu-a002", ["DRAIN"], "link=200Gb/s | expected 400")
    (other,) = parse_show_nodes(real(NODE)).nodes
    assert (other.state, other.flags, other.reason_user) == ("IDLE", ["DRAIN"], "slurm")
    assert other.reason == "gres/gpu count reported lower than configured (0 < 1)"


def test_scontrol_node_listing_refuses_a_job_record():
    with pytest.raises(ParseError, match="a JobId record in a node listing"):
        parse_show_nodes("JobId=1 JobName=x\n   JobState=RUNNING\n")
