"""Plain runs, pairwise, baselines, the CLI and bad input."""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from rest_framework import serializers

from apps.benchmarks import services
from apps.benchmarks.choices import GIB, RunStatus, Verdict
from apps.benchmarks.models import BenchmarkRun, BenchmarkTest
from apps.inventory.choices import HostKeyState
from apps.inventory.models import GpuSku, Node, SshHostKey
from apps.jobs.models import Job

pytestmark = pytest.mark.django_db(transaction=True)


def test_one_node_runs_alone_every_row_kept_and_judged_against_the_nvlink_reference(run_suite):
    run = run_suite("nccl", "gpu001", min_bytes=8, max_bytes=16 * GIB)

    test = run.tests.get()
    assert run.status == RunStatus.SUCCEEDED
    assert test.hosts == ["gpu001"] and test.evidence["command"][0] == "all_reduce_perf"
    assert test.evidence["command"][test.evidence["command"].index("-n") + 1] == "20"  # nccl-tests' own default
    assert [row["size_bytes"] for row in test.series] == [8 * 2**k for k in range(32)]  # 8 B .. 16 GiB
    assert test.size_bytes == 16 * GIB and test.busbw_gb_per_s == test.series[-1]["busbw_gb_per_s"]
    assert test.reference.fabric == "nvlink" and test.expected_gb_per_s == 450
    assert test.verdict == Verdict.PASS  # the ring-only figure sits between the warn tier and NVLS's expected
    assert 75 < test.pct_expected < 90


def test_several_nodes_run_together_with_mpirun_and_the_nccl_environment(run_suite):
    run = run_suite(
        "nccl", "gpu001,gpu002,gpu003,gpu004", collective="all_gather", min_bytes=GIB, max_bytes=4 * GIB, iterations=5
    )

    test = run.tests.get()
    argv = test.evidence["command"]
    # The hostfile script on the launcher: the hosts (one argument, written as "host slots=8" lines), then mpirun's.
    assert argv[:2] == ["sh", "-c"] and argv[3:5] == ["rackpilot-mpirun", "gpu001:8,gpu002:8,gpu003:8,gpu004:8"]
    assert argv[argv.index("-np") + 1] == "32" and argv[argv.index("-N") + 1] == "8"
    assert argv[argv.index("-n") + 1] == "5"
    assert "NCCL_SOCKET_IFNAME=eno1" in argv and "NCCL_IB_HCA=mlx5" in argv and "NCCL_IB_GID_INDEX=3" in argv
    assert argv[argv.index("NCCL_IB_GID_INDEX=3") + 1 : argv.index("all_gather_perf")] == ["--bind-to", "numa"]
    assert test.collective == "all_gather" and len(test.series) == 3


def test_a_baseline_accepted_then_a_regression_is_flagged(run_suite, inject):
    first = run_suite("nccl", "gpu001,gpu002", min_bytes=GIB, max_bytes=4 * GIB)
    assert services.accept_baseline(run=first) == 1

    same = run_suite("nccl", "gpu001,gpu002", min_bytes=GIB, max_bytes=4 * GIB).tests.get()
    assert same.baseline_gb_per_s == first.tests.get().busbw_gb_per_s and not same.regressed

    inject("gpu002", "degraded_cable", "ens1np0", rate_gbps=0, crc_per_million=100)
    slower = run_suite("nccl", "gpu001,gpu002", min_bytes=GIB, max_bytes=4 * GIB).tests.get()
    assert slower.pct_baseline < -5 and slower.regressed
    assert BenchmarkTest.objects.filter(hosts_key="gpu001,gpu002").count() == 3


def test_pairwise_names_the_node_whose_pairs_stay_bad(run_suite, inject):
    inject("gpu003", "degraded_cable", "ens2np0", rate_gbps=100)

    run = run_suite("nccl-pairwise", "rack:r01")

    report = services.sweep_report(run)
    assert [suspect["node"] for suspect in report["suspects"]] == ["gpu003"]
    first_pass = [pair for pair in report["pairs"] if pair["purpose"] == "pair"]
    assert len(first_pass) == 28  # 8 nodes: every pair once
    assert {tuple(pair["nodes"]) for pair in first_pass if pair["verdict"] != "pass"} == {
        tuple(sorted(("gpu003", other)))
        for other in ("gpu001", "gpu002", "gpu004", "gpu005", "gpu006", "gpu007", "gpu008")
    }


def test_cli_sweep_prints_the_json_report(demo_cluster, inject):
    inject("gpu021", "degraded_cable", "ens7np0", rate_gbps=200)
    out = StringIO()

    call_command(
        "benchmark",
        "run",
        "nccl-sweep",
        "--nodes",
        "rack:r03,rack:r04",
        "--transport",
        "sim",
        "--cooldown",
        "0",
        "--json",
        stdout=out,
    )

    report = json.loads(out.getvalue())
    assert report["suspects"][0]["node"] == "gpu021" and report["suspects"][0]["nic"] == "ens7np0"
    assert report["suspects"][0]["switch_port"] and report["suspects"][0]["cable"]
    assert report["suspects"][0]["expected_gb_per_s"] == 360
    assert report["rounds"] <= 9 and report["tests"] > 1
    assert all({"nodes", "busbw_gb_per_s"} <= set(pair) for pair in report["pairs"])


@pytest.mark.parametrize(
    ("options", "field", "words"),
    [
        ({"suite": "nccl-fast"}, "suite", "Unknown suite"),
        ({"collective": "reduce_all"}, "collective", "Unknown collective"),
        ({"min_bytes": 2 * GIB, "max_bytes": GIB}, "min_bytes", "above the largest"),
        ({"max_bytes": 32 * GIB}, "max_bytes", "16 GiB"),
        ({"iterations": 0}, "iterations", "1 to 1000 timed iterations"),
        ({"iterations": 1001}, "iterations", "1 to 1000 timed iterations"),
        ({"nodes": "mgmt01,gpu001"}, "nodes", "no GPUs"),
        ({"nodes": "gpu001,gpu002,gpu003", "suite": "nccl-sweep"}, "nodes", "at least 4 nodes"),
        ({"nodes": "gpu001,nosuch"}, "targets", "No such node"),
    ],
)
def test_bad_input_is_refused_naming_the_field_and_nothing_is_stored(demo_cluster, options, field, words):
    values = {"suite": "nccl", "nodes": "gpu001,gpu002", **options}
    nodes = values.pop("nodes")
    with pytest.raises(serializers.ValidationError) as raised:
        services.start_run(targets=services.parse_nodes(nodes), transport="sim", queue=False, **values)

    assert words in json.dumps(raised.value.detail[field])
    assert not BenchmarkRun.objects.exists() and not Job.objects.exists()


def test_a_set_mixing_skus_is_refused(demo_cluster):
    Node.objects.filter(hostname="gpu002").update(gpu_sku=GpuSku.objects.get(name="H100 SXM"))

    with pytest.raises(serializers.ValidationError) as raised:
        services.start_run(suite="nccl", targets=services.parse_nodes("gpu001,gpu002"), transport="sim", queue=False)
    assert "mixes GPU SKUs (H100 SXM, H200 SXM)" in str(raised.value.detail["nodes"])


def test_ssh_needs_a_trusted_host_key_on_every_node(demo_cluster):
    SshHostKey.objects.create(
        node=Node.objects.get(hostname="gpu001"), public_key="ssh-ed25519 AAAA", state=HostKeyState.TRUSTED
    )

    with pytest.raises(serializers.ValidationError) as raised:
        services.start_run(suite="nccl", targets=services.parse_nodes("gpu001,gpu002"), transport="ssh", queue=False)
    assert "No trusted SSH host key for gpu002" in str(raised.value.detail["nodes"])
    assert not BenchmarkRun.objects.exists()


def test_cli_bad_input_is_a_message_and_nothing_runs(demo_cluster):
    with pytest.raises(CommandError, match="collective: Unknown collective"):
        call_command("benchmark", "run", "nccl", "--nodes", "gpu001", "--transport", "sim", "--collective", "x")
    with pytest.raises(CommandError, match="min_bytes: The smallest size is above the largest"):
        call_command(
            "benchmark",
            "run",
            "nccl",
            "--nodes",
            "gpu001",
            "--transport",
            "sim",
            "--min-bytes",
            "2G",
            "--max-bytes",
            "1G",
        )
    assert not BenchmarkRun.objects.exists()


def test_the_task_runs_a_queued_run_once(demo_cluster, monkeypatch):
    from apps.benchmarks import tasks

    monkeypatch.setattr(services, "enqueue", lambda run: None)
    run = services.start_run(suite="nccl", targets=services.parse_nodes("gpu001,gpu002"), transport="sim")

    assert tasks.run_benchmark(str(run.public_id)) == RunStatus.SUCCEEDED
    assert tasks.run_benchmark(str(run.public_id)) == RunStatus.SUCCEEDED  # redelivered: claimed already, no rerun
    assert Job.objects.count() == 1 and run.tests.count() == 1


def test_a_run_that_names_no_transport_gets_the_installs_default_not_ssh(demo_cluster, settings):
    settings.RACKPILOT_JOB_DEFAULT_TRANSPORT = "sim"
    run = services.start_run(suite="nccl", targets=services.parse_nodes("gpu001,gpu002"), queue=False)
    assert run.transport == "sim"

    settings.RACKPILOT_JOB_DEFAULT_TRANSPORT = "ssh"
    demo = services.start_run(suite="nccl", targets=services.parse_nodes("gpu001,gpu002"), queue=False)
    assert demo.transport == "sim"  # the demo's nodes are on the simulator in either wiring

    Node.objects.update(transport="")  # real nodes: the install's default
    with pytest.raises(serializers.ValidationError) as raised:
        services.start_run(suite="nccl", targets=services.parse_nodes("gpu001,gpu002"), queue=False)
    assert "No trusted SSH host key" in str(raised.value.detail["nodes"])
