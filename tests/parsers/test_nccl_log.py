"""NCCL debug logs: versions, networks, interfaces, rings and classified warnings."""

import pytest

from apps.parsers.nccl_log import classify_warning, parse_nccl_log, transport_kind

from .helpers import assert_parse_error, real


def test_socket_run_on_the_h200():
    log = parse_nccl_log(real("h200-1gpu/nccl-tests-reduce_scatter-nccl-debug-info.txt"))

    assert log.nccl_version == "2.28.3"
    assert log.networks == ["Socket"]
    assert [(i.role, i.name, i.address) for i in log.interfaces] == [("socket", "eth0", "192.0.2.2")]
    assert log.gdr_enabled is False
    assert (log.channels, log.nranks, log.nnodes) == (64, 1, 1)
    assert log.warnings == []
    assert log.hosts == ["vm"]


def test_efa_run_transports_bootstrap_and_ranks():
    log = parse_nccl_log(real("nccl-tests/all_reduce_perf-rtxpro6000-2node-2gpu-efa-nccl2.29.2-debug-info.txt"))

    assert log.nccl_version == "2.29.2"
    assert log.networks == ["Libfabric"] and log.transports == ["NET/Libfabric"]
    assert {(i.role, i.name) for i in log.interfaces} == {("bootstrap", "enp39s0")}
    assert (log.nranks, log.nnodes, log.channels) == (2, 2, 2)
    assert log.hosts == ["gpu-st-ml-1", "gpu-st-ml-2"]


def test_mpirun_prefixed_log_with_p2p_and_gdr():
    log = parse_nccl_log(real("nccl-tests/all_reduce_perf-a100-p4d-2node-16gpu-efa-nccl2.9.9-debug-info-full.txt"))

    assert log.nccl_version == "2.9.9"
    assert log.transports == ["NET/AWS Libfabric", "P2P/IPC"]
    assert log.gdr_enabled is True
    assert log.ring_connections > 0 and log.trees


def test_ib_rings_and_trees_excerpt():
    log = parse_nccl_log(
        real("nccl-tests/nccl-info-trees-ring-net-ib-gdrdma-azure-nc24rs-v3-partial-nccl-tests-issue36.txt")
    )

    assert log.transports == ["NET/IB"] and log.gdr_enabled is True
    assert log.ring_connections == 3
    assert len(log.trees) == 2


def test_ib_completion_error_12_and_cuda_failure_are_classified():
    log = parse_nccl_log(real("nccl-tests/nccl-warn-net-ib-error12-test-failure-v100-partial-nccl-tests-issue24.txt"))

    assert [(w.category, w.line, w.host) for w in log.warnings] == [
        ("ib_roce", 1, "gpu5"),
        ("ib_roce", 6, "gpu4"),
        ("cuda", 13, "gpu5"),
    ]
    assert log.warnings[0].source == "transport/net_ib.cu:788"
    assert log.warnings[0].message.startswith("NET/IB : Got completion with error 12")


def test_ib_status_12_is_ib_roce():
    log = parse_nccl_log(real("nccl-tests/nccl-warn-net-ib-status12-h100-partial-nccl-issue1698.txt"))

    assert {w.category for w in log.warnings} == {"ib_roce"}
    assert "status=12" in log.warnings[0].message


@pytest.mark.parametrize(
    ("message", "category"),
    [
        ("Bootstrap : no socket interface found", "bootstrap"),
        ("NET/Socket : Connect to 10.0.0.2<43123> failed : Connection refused", "bootstrap"),
        ("Watchdog caught collective operation timeout: WorkNCCL(SeqNum=42) ran for 600000 milliseconds", "timeout"),
        ("proxy.cc:1492 NCCL internal error, please report this issue", "internal_error"),
        ("NET/IB : ibv_create_qp failed: Cannot allocate memory", "ib_roce"),
        ("Cuda failure 'out of memory'", "cuda"),
        ("Error: failed to extend /dev/shm/nccl-abc to 9637892 bytes", "system"),
        ("Error : ring 0 does not loop back to start (1 != 0)", "other"),
    ],
)
def test_warning_categories(message, category):
    assert classify_warning(message) == category


@pytest.mark.parametrize(
    ("via", "kind"),
    [
        ("NET/IB/0/GDRDMA", ("NET/IB", True)),
        ("P2P/IPC/read", ("P2P/IPC", False)),
        ("SHM/direct/direct", ("SHM", False)),
    ],
)
def test_transport_kinds(via, kind):
    assert transport_kind(via) == kind


def test_text_without_nccl_lines_is_rejected():
    assert_parse_error(parse_nccl_log, "", 1, "empty input")
    assert_parse_error(parse_nccl_log, real("h200-1gpu/lscpu.txt"), 1, "NCCL debug lines")
    assert_parse_error(parse_nccl_log, real("h200-1gpu/nccl-tests-all_reduce_perf-check.txt"), 1, "NCCL INFO|WARN")
