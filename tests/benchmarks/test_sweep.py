"""The sweep names the one bad node, NIC, cable and switch port out of 32 within 2⌈log₂N⌉+1 rounds, and names nothing
on a healthy cluster."""

import math

import pytest

from apps.benchmarks import link_errors, services
from apps.benchmarks.choices import Purpose, RunStatus, Verdict

pytestmark = pytest.mark.django_db(transaction=True)

ALL = "rack:r01,rack:r02,rack:r03,rack:r04"


def bound(n):
    return 2 * math.ceil(math.log2(n)) + 1


@pytest.mark.parametrize(
    ("kind", "target", "parameters", "nic", "cause"),
    [
        ("degraded_cable", "ens3np0", {"rate_gbps": 200}, "ens3np0", "link at 200 Gb/s"),
        ("mtu", "ens6np0", {"mtu": 1500}, "ens6np0", "MTU 1500"),
        ("pfc_off", "3", {}, "ens1np0", "PFC off on priority 3"),
    ],
)
def test_sweep_names_the_faulty_node_down_to_its_switch_port(run_suite, inject, kind, target, parameters, nic, cause):
    inject("gpu013", kind, target, **parameters)

    run = run_suite("nccl-sweep", ALL)

    assert run.status == RunStatus.SUCCEEDED, run.summary
    report = services.sweep_report(run)
    assert [suspect["node"] for suspect in report["suspects"]] == ["gpu013"]
    suspect = report["suspects"][0]
    assert suspect["nic"] == nic
    assert cause in suspect["cause"]
    # gpu013 is the 5th node of rack r02: its k-th data NIC is port 8*4+k of that rack's leaf on the NIC's plane
    k = int(nic[3]) - 1
    plane = "a" if k % 2 == 0 else "b"
    assert suspect["switch"] == f"leaf-r02-{plane}"
    assert suspect["switch_port"] == f"swp{4 * 4 + k // 2 + 1}"
    assert suspect["cable"]
    assert suspect["busbw_gb_per_s"] < suspect["expected_gb_per_s"]
    assert report["rounds"] <= bound(32) == 11
    assert report["tests"] < 32 * 31 // 2
    confirm = run.tests.get(purpose=Purpose.CONFIRM, subject="gpu013")
    isolate = run.tests.get(purpose=Purpose.ISOLATE, subject="gpu013")
    assert confirm.partner != isolate.partner  # confirmed against a different known-good partner
    assert {isolate.partner, confirm.partner}.isdisjoint({"gpu013"})
    assert all(len(pair["nodes"]) == 2 and pair["busbw_gb_per_s"] for pair in report["pairs"])


def test_healthy_cluster_names_nothing_in_one_round(run_suite):
    run = run_suite("nccl-sweep", ALL)

    report = services.sweep_report(run)
    assert run.status == RunStatus.SUCCEEDED
    assert report["suspects"] == [] and report["rounds"] == 1 and report["tests"] == 1
    assert run.tests.get().verdict == Verdict.PASS
    assert len(run.tests.get().hosts) == 32


def test_a_crc_only_cable_is_named_by_the_nic_counters_read_around_each_round(run_suite, inject):
    # 10 corrupted frames per million: RoCE resends the window, NCCL loses ~1 %, every bandwidth test passes
    inject("gpu004", "degraded_cable", "ens5np0", rate_gbps=0, crc_per_million=10)

    run = run_suite("nccl-sweep", "rack:r01")

    assert run.status == RunStatus.SUCCEEDED, run.summary
    assert all(test.verdict == Verdict.PASS for test in run.tests.all())  # the halving alone would name nothing
    suspect = run.suspects.get()
    nic = suspect.node.nics.select_related("cable_as_a__b_switch", "cable_as_b__a_switch").get(name="ens5np0")
    assert (suspect.node.hostname, suspect.nic) == ("gpu004", "ens5np0")
    assert (suspect.cable, suspect.switch, suspect.switch_port) == link_errors.cable_end(nic)
    assert suspect.switch == "leaf-r01-a" and suspect.switch_port
    assert "rx_crc_errors_phy +" in suspect.cause and "round 1" in suspect.cause
    assert (
        suspect.verdict == Verdict.FAIL and suspect.busbw_gb_per_s
    )  # 10 per million is past the 1 per million warn tier
    every_round = list(run.rounds.order_by("index"))
    assert every_round[0].link_errors[0]["node"] == "gpu004" and every_round[0].link_errors[0]["frames"] > 0
    assert all(item["nic"] == "ens5np0" for round_ in every_round for item in round_.link_errors)
    assert "1 suspect: gpu004" in run.summary
    assert services.sweep_report(run)["suspects"][0]["cable"] == suspect.cable


def test_a_healthy_cluster_s_counters_name_nothing(run_suite):
    run = run_suite("nccl-sweep", "rack:r01")

    assert not run.suspects.exists() and run.rounds.get().link_errors == []
