"""Runbook 2's pure functions on series in nvidia-smi's -lms format (as the real tool prints --format=csv,nounits:
units stay in the header, the reasons are a 64-bit hex mask) and on kubectl's real `get pods -A -o wide` layout."""

import math
import random
from pathlib import Path

from apps.diagnosis import utilisation
from apps.diagnosis.choices import Cause, EvidenceVerdict
from apps.parsers.kubernetes import parse_get_pods

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"
HEADER = (
    "timestamp, index, utilization.gpu [%], clocks.current.sm [MHz], clocks_event_reasons.active, power.draw [W], "
    "power.limit [W], power.default_limit [W], temperature.gpu"
)
IDLE, POWER_CAP, APP_CLOCKS = 0x1, 0x4, 0x2
THERMAL = 0x8 | 0x20 | 0x40  # hw_slowdown, sw_thermal_slowdown, hw_thermal_slowdown, as a hot card shows them


def series(rows_of, samples: int = 150, gpus: int = 2) -> str:
    """rows_of(sample, gpu) -> (util, clock, mask, power, limit, default, temperature), 200 ms apart."""
    lines = [HEADER]
    for sample in range(samples):
        ms = sample * 200
        stamp = f"2026/12/01 10:{ms // 60000:02d}:{ms // 1000 % 60:02d}.{ms % 1000:03d}"
        for gpu in range(gpus):
            util, clock, mask, power, limit, default, temperature = rows_of(sample, gpu)
            cells = (stamp, gpu, util, clock, f"0x{mask:016x}", f"{power:.2f}", f"{limit:.2f}", f"{default:.2f}")
            lines.append(", ".join(str(cell) for cell in (*cells, temperature)))
    return "@@rackpilot nvidia-smi samples\n" + "\n".join(lines) + "\n"


def steady(util=96, clock=1755, mask=POWER_CAP, limit=700.0):
    rng = random.Random(1)
    return lambda sample, gpu: (util + rng.randint(-2, 2), clock, mask, 690.0, limit, 700.0, 61)


def test_a_series_is_read_per_gpu_with_its_times_and_decoded_reasons():
    gpus = utilisation.read_series(series(steady(), samples=3))
    assert sorted(gpus) == [0, 1]
    gpu = gpus[1]
    assert gpu.times == [0.0, 0.2, 0.4] and gpu.sm_mhz == [1755.0] * 3
    assert gpu.reasons == [("sw_power_cap",)] * 3
    assert (gpu.power_limit_w, gpu.default_limit_w, gpu.temperature_c) == (700.0, 700.0, 61.0)


def test_the_real_single_sample_query_reads_but_is_too_short_to_judge():
    text = (REAL / "h200-1gpu" / "nvidia-smi-query-gpu.csv").read_text()
    gpus = utilisation.read_series(text)
    assert gpus[0].util == [0.0] and gpus[0].reasons == [("gpu_idle",)]
    (seen,) = utilisation.judge_series("h200", True, text, "nvidia-smi ...")
    assert seen.verdict == EvidenceVerdict.COULD_NOT_RUN and "only 1 sample" in seen.summary


def test_a_failed_or_empty_sampler_could_not_run_on_its_node():
    (failed,) = utilisation.judge_series("n4", False, "sh: 1: nvidia-smi: not found", "sh -c ...")
    assert (failed.hostname, failed.verdict) == ("n4", EvidenceVerdict.COULD_NOT_RUN) and "not found" in failed.summary
    (empty,) = utilisation.judge_series("n4", True, "@@rackpilot nvidia-smi samples\n" + HEADER + "\n", "sh -c ...")
    assert (empty.hostname, empty.verdict) == ("n4", EvidenceVerdict.COULD_NOT_RUN)
    assert empty.summary.startswith("unreadable samples")


def test_a_square_wave_gives_its_period_depth_and_idle_share():
    util = [5 if math.fmod(i * 0.2, 4.0) < 1.2 else 96 for i in range(150)]
    dips = utilisation.dips(util, 0.2)
    assert dips.periodic and dips.period_s == 4.0 and dips.depth == 91 and abs(dips.share - 0.3) < 0.04


def test_noise_is_not_a_dip():
    rng = random.Random(3)
    dips = utilisation.dips([96 + rng.uniform(-2, 2) for _ in range(150)], 0.2)
    assert not dips.periodic and dips.depth < 5


def test_one_deep_dip_is_not_periodic():
    util = [96] * 150
    util[70:80] = [10] * 10
    dips = utilisation.dips(util, 0.2)
    assert dips.depth > 80 and not dips.periodic


def test_a_power_cap_counts_only_below_the_default_limit():
    at_default = utilisation.judge_series("n1", True, series(steady()), "cmd")
    assert [o.check for o in at_default] == ["series", "throttle"]
    assert at_default[1].verdict == EvidenceVerdict.HEALTHY

    def capped(sample, gpu):
        return (
            96,
            1305 if gpu == 1 else 1755,
            POWER_CAP,
            440.0 if gpu == 1 else 690.0,
            450.0 if gpu == 1 else 700.0,
            700.0,
            55,
        )

    found = utilisation.judge_series("n1", True, series(capped), "cmd")
    (cap,) = [o for o in found if o.check == "power_cap"]
    assert (cap.subject, cap.verdict, cap.data["gpu"], cap.data["clock"]) == ("GPU 1", EvidenceVerdict.FAULT, 1, 1305)
    assert "power limit 450 W, default 700 W" in cap.summary


def test_thermal_and_application_clocks_are_named_with_their_reasons():
    def rows(sample, gpu):
        return (
            (96, 990, THERMAL, 420.0, 700.0, 700.0, 94) if gpu == 0 else (96, 1095, APP_CLOCKS, 380.0, 700.0, 700.0, 50)
        )

    found = {o.check: o for o in utilisation.judge_series("n2", True, series(rows), "cmd")}
    assert found["thermal"].data["reasons"] == ["sw_thermal_slowdown", "hw_thermal_slowdown", "hw_slowdown"]
    assert "94 °C" in found["thermal"].summary
    assert found["clocks_capped"].data["reasons"] == ["applications_clocks_setting"]


def test_reasons_in_waits_only_do_not_count():
    def rows(sample, gpu):  # idle between batches: gpu_idle in the waits is no throttle
        return (96, 1755, 0, 690.0, 700.0, 700.0, 60) if sample % 3 else (2, 345, IDLE, 90.0, 700.0, 700.0, 40)

    assert [o.check for o in utilisation.judge_series("n3", True, series(rows), "cmd")] == ["series", "throttle"]


def _summaries(*means, clock=1755, periodic=False):
    return [
        {
            "index": i,
            "mean": mean,
            "clock": clock,
            "periodic": periodic,
            "period_s": 4.0 if periodic else None,
            "depth": 90.0 if periodic else 3.0,
            "dip_share": 0.3 if periodic else 0.0,
        }
        for i, mean in enumerate(means)
    ]


def test_the_fleet_names_the_gpu_the_others_wait_for():
    found = {o.check: o for o in utilisation.fleet([("a", _summaries(55, 55)), ("b", _summaries(96, 55))])}
    assert found["lag"].verdict == EvidenceVerdict.FAULT and found["lag"].data["gpus"] == [["b", 0]]
    assert found["lag"].hostname == "b" and "b GPUs 0 behind the fleet" in found["lag"].summary
    assert found["dips"].verdict == EvidenceVerdict.HEALTHY


def test_a_steady_fleet_has_no_lag_and_dips_on_every_gpu_are_one_finding():
    found = {o.check: o for o in utilisation.fleet([("a", _summaries(96, 95)), ("b", _summaries(96, 97))])}
    assert found["lag"].verdict == EvidenceVerdict.HEALTHY and found["dips"].verdict == EvidenceVerdict.HEALTHY
    dipping = [("a", _summaries(66, 66, periodic=True)), ("b", _summaries(66, 66, periodic=True))]
    found = {o.check: o for o in utilisation.fleet(dipping)}
    assert found["dips"].verdict == EvidenceVerdict.FAULT and found["dips"].data["period_s"] == 4.0
    half = [("a", _summaries(66, 66, periodic=True)), ("b", _summaries(96, 96))]
    assert {o.check: o for o in utilisation.fleet(half)}["dips"].verdict == EvidenceVerdict.INFO


def test_the_branch_goes_to_the_scheduler_only_for_a_lag_nothing_explains():
    lag = utilisation.Observation("lag", "b", EvidenceVerdict.FAULT, "", "")
    cap = utilisation.Observation("power_cap", "GPU 1", EvidenceVerdict.FAULT, "", "")
    assert utilisation.next_step([lag], {}) == "scheduler"
    assert utilisation.next_step([lag, cap], {}) == "conclude"
    assert utilisation.conclude({Cause.CO_LOCATED_TRAINER: 2, Cause.DATALOADER_STALL: -3}) == ""
    assert utilisation.conclude({Cause.GPU_POWER_CAPPED: 11, Cause.CO_LOCATED_TRAINER: 2}) == Cause.GPU_POWER_CAPPED


# kubectl get pods --all-namespaces -o wide, as kubectl lays it out (a RESTARTS cell may hold spaces): a second
# trainer beside the job's on gpu003.
PODS = (Path(__file__).parent / "data" / "kubectl-get-pods-all-namespaces-wide.txt").read_text()


def test_kubectl_pods_are_cut_at_the_header_columns():
    pods = parse_get_pods(PODS).pods
    assert [(p.namespace, p.name, p.node) for p in pods][2] == ("training", "finetune-7b-worker-0", "gpu003")
    assert pods[2].restarts == "2 (40m ago)" and pods[2].ip == "10.244.2.21" and pods[2].line == 4
    plain = parse_get_pods("NAME      READY   STATUS    RESTARTS   AGE\ntrainer   1/1     Running   0          5m\n")
    assert (plain.pods[0].name, plain.pods[0].namespace, plain.pods[0].node) == ("trainer", None, None)
    assert parse_get_pods("No resources found in default namespace.\n").pods == []


def test_a_second_trainer_on_a_node_behind_is_a_placement_fault():
    found = utilisation.judge_pods(["gpu003", "gpu004"], "llm-pretrain-", True, PODS, "kubectl get pods")
    placed, alone = found
    assert (placed.hostname, placed.verdict) == ("gpu003", EvidenceVerdict.FAULT)
    assert placed.data["others"] == ["finetune-7b-worker-0"]
    assert "finetune-7b-worker-0" in placed.excerpt and placed.excerpt.startswith("NAMESPACE")
    assert (alone.hostname, alone.verdict) == ("gpu004", EvidenceVerdict.HEALTHY)


def test_the_power_cap_fix_puts_the_default_limit_back_on_that_gpu():
    cap = utilisation.Observation("power_cap", "GPU 1", EvidenceVerdict.FAULT, "", "", hostname="n1", data={"gpu": 1})
    summary, commands = utilisation.fix_for(Cause.GPU_POWER_CAPPED, [cap], {("n1", 1): {"default_limit_w": 700.0}})
    assert [command.text() for command in commands] == ["nvidia-smi -i 1 -pl 700"]
    assert summary == "Put the power limit back to the default 700 W on n1 GPU 1"
