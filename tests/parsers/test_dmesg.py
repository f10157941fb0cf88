"""Kernel logs: NVIDIA Xid events with the GPU, the process and what the Xid means."""

import pytest

from apps.parsers.dmesg import XID_MEANINGS, parse_dmesg, xid_meaning

from .helpers import assert_parse_error, real


def test_xid_119_gsp_timeouts():
    log = parse_dmesg(real("dmesg/gpud-dmesg-with-xid-119.log"))

    assert log.xid_counts == {"119": 5}
    first = log.xids[0]
    assert (first.xid, first.pci_bus_id, first.pid, first.process) == (119, "0000:9b:00", 2024380, "nvidia-smi")
    assert first.meaning == "GSP RPC timeout" and first.kind == "driver"
    assert first.timestamp == "Sun Feb 23 16:24:18 2025" and first.line == 3
    assert first.gpu_uuid == "GPU-509665ad-b600-ac93-3616-d754b23d636d"
    assert first.message.startswith("Timeout after 6s of waiting for RPC response from GPU4 GSP!")
    assert [event.process for event in log.xids][-2:] == ["cache_mgr_main", "gpud"]


def test_fallen_off_the_bus_with_unknown_process():
    text = (
        "[ 3817.127663] NVRM: GPU at PCI:0000:3b:00: GPU-aaaa\n"
        "[ 3817.127665] NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n"
        "[ 3818.000001] NVRM: Xid (PCI:0000:3b:00): 48, pid=9, name=python3, An uncorrectable double bit error\n"
    )

    log = parse_dmesg(text)

    assert [(event.xid, event.pid, event.process) for event in log.xids] == [(79, None, None), (48, 9, "python3")]
    assert log.xids[0].meaning == "GPU has fallen off the bus" and log.xids[0].kind == "hardware"
    assert log.xids[0].timestamp == "3817.127665" and log.xids[0].gpu_uuid == "GPU-aaaa"
    assert log.xid_counts == {"48": 1, "79": 1}


@pytest.mark.parametrize("xid", [13, 31, 43, 45, 48, 61, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120, 140])
def test_common_xids_have_a_meaning(xid):
    assert xid_meaning(xid)
    assert XID_MEANINGS[xid][1] in {"application", "driver", "memory", "hardware", "nvlink"}


def test_an_unknown_xid_is_kept_without_a_meaning():
    log = parse_dmesg("[ 1.000000] NVRM: Xid (PCI:0000:01:00): 999, pid=1, name=x, something new\n")

    assert log.xids[0].xid == 999 and log.xids[0].meaning is None


def test_a_quiet_kernel_log_has_no_xids():
    assert parse_dmesg("[    0.000000] Linux version 6.8.0-49-generic\n").xids == []


def test_not_a_kernel_log_is_rejected():
    assert_parse_error(parse_dmesg, "", 1, "empty input")
    assert_parse_error(parse_dmesg, real("h200-1gpu/lscpu.txt"), 1, "kernel log lines")
    # UCX warnings carry a timestamp in brackets too; they are not kernel lines.
    assert_parse_error(parse_dmesg, real("hpl-mxp/hpl-mxp-nvidia-25.9.0-a100-40gb-1gpu-n10000-passed-ansi.txt"), 1)
