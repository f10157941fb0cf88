"""HPL-MxP, nvbandwidth and the burn-in soak on the simulator: every figure a row judged against the SKU's reference,
faults moving the figures the way the real fault does, baselines, bad input refused naming the field, REST, pages
and the CLI. The simulated output is read by the same parsers as the real captures (tests/simulator)."""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from rest_framework import serializers

from apps.benchmarks import services
from apps.benchmarks.choices import RunStatus, Verdict
from apps.benchmarks.models import BenchmarkRun, Measurement, MeasurementReference
from apps.inventory.models import GpuSku, Node
from apps.jobs.models import Job

pytestmark = pytest.mark.django_db(transaction=True)


def figures(run, case):
    return {
        item.launcher if len(item.hosts) == 1 else "+".join(item.hosts): item
        for item in run.measurements.filter(case=case)
    }


def test_hpl_mxp_runs_each_node_then_across_the_set_and_a_power_capped_node_fails(run_suite, inject):
    inject("gpu002", "power_cap", watts=350)
    run = run_suite("hpl-mxp", "gpu001,gpu002,gpu003")

    assert run.status == RunStatus.SUCCEEDED and run.rounds.count() == 2
    lu = figures(run, "lu_gflops_per_gpu")
    assert set(lu) == {"gpu001", "gpu002", "gpu003", "gpu001+gpu002+gpu003"}
    healthy = lu["gpu001"]
    assert healthy.verdict == Verdict.PASS and healthy.expected == 310_000 and 280_000 < healthy.value < 340_000
    assert healthy.series["n"] > 300_000 and healthy.series["residual_check"] == "PASSED"  # fits 8 x 141 GB
    assert lu["gpu002"].verdict == Verdict.FAIL and lu["gpu002"].value < 250_000
    across = lu["gpu001+gpu002+gpu003"]
    assert across.series["nprow"] * across.series["npcol"] == 24
    assert across.value <= lu["gpu002"].value * 1.01  # bulk-synchronous: the capped node sets the pace
    assert "mpirun" in across.evidence["command"] and "hpl-mxp.sh" in across.evidence["command"]
    assert "Voltage Park" in healthy.evidence["reference_source"]


def test_hpl_mxp_with_a_gpu_off_the_bus_could_not_run_and_the_run_fails(run_suite, inject):
    inject("gpu001", "xid79", "3")
    run = run_suite("hpl-mxp", "gpu001")

    assert run.status == RunStatus.FAILED
    lu = figures(run, "lu_gflops_per_gpu")["gpu001"]
    assert lu.verdict == Verdict.COULD_NOT_RUN and lu.value is None
    assert any("invalid device ordinal" in note for note in lu.evidence["notes"])


def test_classic_hpl_runs_each_node_then_across_the_set_judged_in_fp64(run_suite, inject):
    inject("gpu002", "power_cap", watts=350)
    inject("gpu003", "ecc", "4")
    run = run_suite("hpl", "gpu001,gpu002,gpu003,gpu004")

    assert run.rounds.count() == 2
    hpl = figures(run, "hpl_gflops_per_gpu")
    assert set(hpl) == {"gpu001", "gpu002", "gpu003", "gpu004", "gpu001+gpu002+gpu003+gpu004"}
    healthy = hpl["gpu001"]
    assert healthy.verdict == Verdict.PASS and healthy.expected == 42_000 and 37_800 < healthy.value < 49_200
    assert healthy.series["p"] * healthy.series["q"] == 8 and healthy.series["residual_check"] == "PASSED"
    assert healthy.series["n"] == 347_136  # the FP64 matrix alone: 8 bytes an element in 80 % of 8 x 141 GiB
    assert healthy.value == pytest.approx(healthy.series["gflops"] / 8)
    assert hpl["gpu002"].verdict == Verdict.FAIL and hpl["gpu002"].value < 33_600  # the cap slows FP64 too
    wrong = hpl["gpu003"]  # uncorrectable ECC: fast, but the solution is wrong
    assert wrong.verdict == Verdict.COULD_NOT_RUN and wrong.value is None and wrong.series["residual_check"] == "FAILED"
    assert any("residual check FAILED" in note for note in wrong.evidence["notes"])
    command = hpl["gpu001+gpu002+gpu003+gpu004"].evidence["command"]
    assert command[:2] == ["sh", "-c"] and "hpl.sh --dat" in command[2] and command[-1].count(":8") == 4
    assert "67 TFLOPS FP64 tensor core" in healthy.evidence["reference_source"]
    assert run.status == RunStatus.FAILED  # a figure could not be judged


def test_nvbandwidth_judges_every_case_and_a_degraded_nvlink_or_pcie_link_shows(run_suite, inject):
    inject("gpu001", "nvlink_down", "2", link=5)
    inject("gpu002", "pcie_downtrained", "5", gen=4, width=8)
    run = run_suite("nvbandwidth", "gpu001,gpu002,gpu003")

    cases = set(run.measurements.values_list("case", flat=True))
    assert cases == {
        "host_to_device_memcpy_ce",
        "device_to_host_memcpy_ce",
        "device_to_device_memcpy_read_ce",
        "device_to_device_memcpy_write_ce",
        "device_to_device_bidirectional_memcpy_read_ce",
        "device_local_copy",
    }
    d2d = figures(run, "device_to_device_memcpy_read_ce")
    assert d2d["gpu003"].verdict == Verdict.PASS and len(d2d["gpu003"].series["matrix"]) == 8
    assert d2d["gpu001"].verdict == Verdict.WARN  # 17 of 18 links on GPU 2
    assert any("row 2" in note or "column 2" in note for note in d2d["gpu001"].evidence["notes"])
    h2d = figures(run, "host_to_device_memcpy_ce")
    assert h2d["gpu002"].verdict == Verdict.FAIL and h2d["gpu001"].verdict == Verdict.PASS
    assert figures(run, "device_local_copy")["gpu003"].expected == 4200


def test_burn_in_catches_a_gpu_that_throttles_only_after_ten_minutes(run_suite, inject):
    inject("gpu001", "late_thermal", "2", after_s=600)
    short = run_suite("burn-in", "gpu001,gpu002", duration_seconds=300)
    clock = figures(short, "sustained_sm_clock_mhz")
    assert clock["gpu001"].verdict == clock["gpu002"].verdict == Verdict.PASS  # five minutes: not yet

    run = run_suite("burn-in", "gpu001,gpu002", duration_seconds=900)
    clock = figures(run, "sustained_sm_clock_mhz")
    assert clock["gpu002"].verdict == Verdict.PASS and clock["gpu002"].value >= 1400
    hot = clock["gpu001"]
    assert hot.verdict == Verdict.FAIL and hot.value <= 990
    assert "GPU 2: sw_thermal_slowdown, hw_thermal_slowdown from 600 s into the soak" in hot.evidence["notes"]
    samples = hot.series["gpus"]["2"]
    assert samples["t"][0] == 0 and samples["t"][-1] == 900
    assert samples["temperature_c"][-1] >= 90 and samples["sm_mhz"][10] > 1400


def test_burn_in_fails_a_node_whose_gpu_fell_off_the_bus_or_shows_compare_errors(run_suite, inject):
    inject("gpu001", "xid79", "7")
    inject("gpu002", "ecc", "1", count=2)
    run = run_suite("burn-in", "gpu001,gpu002,gpu003", duration_seconds=60)

    clock = figures(run, "sustained_sm_clock_mhz")
    assert clock["gpu003"].verdict == Verdict.PASS
    assert clock["gpu001"].verdict == Verdict.FAIL
    assert "gpu_burn tested 7 of the 8 GPUs the inventory lists" in clock["gpu001"].evidence["notes"]
    assert clock["gpu002"].verdict == Verdict.FAIL
    assert any("FAULTY" in note for note in clock["gpu002"].evidence["notes"])


def test_a_power_cap_warns_and_an_accepted_baseline_flags_the_regression(run_suite, inject, browser_as, viewer):
    first = run_suite("burn-in", "gpu001", duration_seconds=60)
    services.accept_baseline(run=first)
    same = run_suite("burn-in", "gpu001", duration_seconds=60)
    inject("gpu001", "power_cap", watts=450)
    second = run_suite("burn-in", "gpu001", duration_seconds=60)

    clock = figures(second, "sustained_sm_clock_mhz")["gpu001"]
    assert (
        clock.verdict == Verdict.WARN
        and clock.baseline_value == figures(first, "sustained_sm_clock_mhz")["gpu001"].value
    )
    assert clock.pct_baseline < -5 and clock.regressed
    # A change reads as one, signed; a figure equal to its baseline says so (was "% baseline: 0.0 %").
    page = browser_as(viewer).get(f"/benchmarks/runs/{second.public_id}/").content.decode()
    assert "<th>vs baseline</th>" in page and f"\u2212{abs(clock.pct_baseline):.1f} %" in page
    unchanged = browser_as(viewer).get(f"/benchmarks/runs/{same.public_id}/").content.decode()
    assert figures(same, "sustained_sm_clock_mhz")["gpu001"].pct_baseline == 0
    assert "as the baseline" in unchanged and "0.0 %" not in unchanged


def test_editing_a_reference_changes_later_verdicts(run_suite):
    MeasurementReference.objects.filter(sku_name="H200 SXM", case="sustained_sm_clock_mhz").update(
        expected=1800, warn_below=1700, fail_below=1600
    )
    run = run_suite("burn-in", "gpu001", duration_seconds=60)
    assert figures(run, "sustained_sm_clock_mhz")["gpu001"].verdict == Verdict.FAIL


@pytest.mark.parametrize(
    ("options", "field", "words"),
    [
        ({"suite": "burn-in", "duration_seconds": 10}, "duration_seconds", "60 to 14400"),
        ({"suite": "burn-in", "duration_seconds": 5 * 3600}, "duration_seconds", "60 to 14400"),
        ({"suite": "hpl-mxp", "hpl_n": 12}, "hpl_n", "matrix order"),
        ({"suite": "hpl-mxp", "nodes": "mgmt01,gpu001"}, "nodes", "no GPUs"),
        ({"suite": "nvbandwidth", "transport": "local"}, "nodes", "exactly one node"),
        ({"suite": "nvbandwidth", "transport": "telnet"}, "transport", "not 'telnet'"),
        ({"suite": "hpl-mxp", "nodes": "gpu001,nosuch"}, "targets", "No such node"),
    ],
)
def test_bad_input_is_refused_naming_the_field_and_nothing_is_stored(demo_cluster, options, field, words):
    values = {"nodes": "gpu001,gpu002", "transport": "sim", **options}
    nodes = values.pop("nodes")
    with pytest.raises(serializers.ValidationError) as raised:
        services.start_run(targets=services.parse_nodes(nodes), queue=False, **values)

    assert words in json.dumps(raised.value.detail[field], ensure_ascii=False)
    assert not BenchmarkRun.objects.exists() and not Job.objects.exists()


def test_hpl_mxp_needs_one_sku_but_nvbandwidth_judges_each_node_against_its_own(demo_cluster):
    Node.objects.filter(hostname="gpu002").update(gpu_sku=GpuSku.objects.get(name="H100 SXM"))
    with pytest.raises(serializers.ValidationError) as raised:
        services.start_run(suite="hpl-mxp", targets=services.parse_nodes("gpu001,gpu002"), transport="sim", queue=False)
    assert "mixes GPU SKUs (H100 SXM, H200 SXM)" in str(raised.value.detail["nodes"])

    run = services.start_run(
        suite="nvbandwidth", targets=services.parse_nodes("gpu001,gpu002"), transport="sim", queue=False
    )
    run = services.execute_run(run=run)
    local = figures(run, "device_local_copy")
    assert run.sku_name == "mixed"
    assert (local["gpu001"].sku_name, local["gpu001"].expected) == ("H200 SXM", 4200)
    assert (local["gpu002"].sku_name, local["gpu002"].expected) == ("H100 SXM", 2900)


def test_cli_runs_a_suite_and_prints_json_or_refuses_bad_input(demo_cluster):
    out = StringIO()
    call_command(
        "benchmark",
        "run",
        "burn-in",
        "--nodes",
        "gpu001",
        "--transport",
        "sim",
        "--duration",
        "60",
        "--json",
        stdout=out,
    )
    report = json.loads(out.getvalue())
    assert report["suite"] == "burn-in" and report["status"] == "succeeded"
    assert report["parameters"]["duration_seconds"] == 60
    row = next(row for row in report["measurements"] if row["case"] == "sustained_sm_clock_mhz")
    assert row["verdict"] == "pass" and row["unit"] == "MHz" and row["expected"] == 1455

    with pytest.raises(CommandError, match="duration_seconds: A soak of 60 to 14400 seconds"):
        call_command("benchmark", "run", "burn-in", "--nodes", "gpu001", "--transport", "sim", "--duration", "5")
    with pytest.raises(CommandError, match="suite: Unknown suite"):
        call_command("benchmark", "run", "linpack", "--nodes", "gpu001", "--transport", "sim")
    assert BenchmarkRun.objects.count() == 1


@pytest.fixture
def no_celery(monkeypatch):
    started = []
    monkeypatch.setattr(services, "enqueue", lambda run: started.append(run.public_id))
    return started


def test_api_start_roles_and_400_naming_the_field(demo_cluster, api_client, api_as, viewer, operator, no_celery):
    body = {"suite": "burn-in", "nodes": ["gpu001"], "transport": "sim", "duration_seconds": 600}
    assert api_client.post("/api/benchmarks/", body, format="json").status_code in (401, 403)
    assert api_as(viewer).post("/api/benchmarks/", body, format="json").status_code == 403
    bad = api_as(operator).post("/api/benchmarks/", {**body, "duration_seconds": 30}, format="json")
    assert bad.status_code == 400 and "duration_seconds" in bad.json()
    bad = api_as(operator).post("/api/benchmarks/", {**body, "suite": "linpack"}, format="json")
    assert bad.status_code == 400 and "suite" in bad.json()
    assert not BenchmarkRun.objects.exists() and no_celery == []

    created = api_as(operator).post("/api/benchmarks/", body, format="json")
    assert created.status_code == 201 and created.json()["parameters"]["duration_seconds"] == 600
    assert no_celery == [BenchmarkRun.objects.get().public_id]


def test_api_measurements_page_and_run_page_show_the_figures(run_suite, inject, api_as, api_client, viewer, browser_as):
    inject("gpu001", "late_thermal", "0", after_s=120)
    run = run_suite("burn-in", "gpu001,gpu002", duration_seconds=300)
    url = f"/api/benchmarks/{run.public_id}/measurements/"
    assert api_client.get(url).status_code in (401, 403)
    response = api_as(viewer).get(url)
    assert response.status_code == 200
    rows = response.json()["results"]
    assert {row["case"] for row in rows} == {"sustained_sm_clock_mhz", "gpu_burn_gflops"}
    hot = next(row for row in rows if row["launcher"] == "gpu001" and row["case"] == "sustained_sm_clock_mhz")
    assert hot["verdict"] == "fail" and hot["series"]["gpus"]["0"]["sm_mhz"]

    before = list(Measurement.objects.order_by("id").values_list("updated", flat=True))
    page = browser_as(viewer).get(f"/benchmarks/runs/{run.public_id}/").content.decode()
    assert 'id="measurements"' in page and 'data-plotly-figure="bar-figure"' in page
    soak = json.loads(page.split('<script id="soak-figure" type="application/json">')[1].split("</script>")[0])
    assert "gpu001" in soak["layout"]["title"]["text"]  # the worst node is shown first
    assert any(trace["name"] == "GPU 0 thermal slowdown" for trace in soak["data"])
    assert list(Measurement.objects.order_by("id").values_list("updated", flat=True)) == before  # reads write nothing


def test_nvbandwidth_page_draws_the_chosen_nodes_matrices(run_suite, browser_as, viewer):
    run = run_suite("nvbandwidth", "gpu001,gpu002")
    page = browser_as(viewer).get(f"/benchmarks/runs/{run.public_id}/?node=gpu002").content.decode()
    matrix = json.loads(page.split('<script id="matrix-0" type="application/json">')[1].split("</script>")[0])
    assert matrix["data"][0]["type"] == "heatmap" and len(matrix["data"][0]["z"]) == 8
    assert "gpu002" in matrix["layout"]["title"]["text"]
    # Coloured against the reference's tiers, not the matrix's own spread (±0.3 % of noise went red to green).
    heatmap = matrix["data"][0]
    measured = Measurement.objects.get(run=run, hosts=["gpu002"], case="device_to_device_memcpy_read_ce")
    assert (heatmap["zmin"], heatmap["zmax"]) == (measured.reference.fail_below, measured.reference.expected)


def test_measurement_references_are_editable_by_operators_with_ordered_tiers(demo_cluster, api_as, viewer, operator):
    reference = MeasurementReference.objects.get(sku_name="H200 SXM", case="lu_gflops_per_gpu")
    url = f"/api/benchmark-measurement-references/{reference.public_id}/"
    assert api_as(viewer).patch(url, {"expected": 300000}, format="json").status_code == 403
    assert api_as(operator).patch(url, {"warn_below": 400000}, format="json").status_code == 400
    assert api_as(operator).patch(url, {"expected": 320000}, format="json").status_code == 200
    reference.refresh_from_db()
    assert reference.expected == 320000


def test_burn_in_under_dcgmi_diag_r3_fails_on_its_findings_and_the_sampled_slowdown(run_suite, inject):
    inject("gpu001", "late_thermal", "4", after_s=600)
    run = run_suite("burn-in", "gpu001,gpu002", burn_load="dcgmi-r3")

    assert run.parameters["duration_seconds"] == 1800
    clock = figures(run, "sustained_sm_clock_mhz")
    assert set(run.measurements.values_list("case", flat=True)) == {"sustained_sm_clock_mhz"}
    assert clock["gpu002"].verdict == Verdict.PASS
    assert {"name": "Targeted Power", "status": "pass"} in clock["gpu002"].series["diag"]
    hot = clock["gpu001"]
    assert hot.verdict == Verdict.FAIL and "dcgmi" in hot.evidence["command"][2]
    assert any(note.startswith("Targeted Power: fail") for note in hot.evidence["notes"])
    assert any("from 600 s into the soak" in note for note in hot.evidence["notes"])


def test_a_dcgmi_soak_takes_no_duration_and_an_unknown_load_is_refused(demo_cluster):
    for options, field in (
        ({"burn_load": "dcgmi-r3", "duration_seconds": 600}, "duration_seconds"),
        ({"burn_load": "stress-ng"}, "burn_load"),
    ):
        with pytest.raises(serializers.ValidationError) as raised:
            services.start_run(
                suite="burn-in", targets=services.parse_nodes("gpu001"), transport="sim", queue=False, **options
            )
        assert field in raised.value.detail
    assert not BenchmarkRun.objects.exists()


def test_start_form_takes_a_soak_and_refuses_a_short_one(demo_cluster, browser_as, operator, no_celery):
    data = {
        "suite": "burn-in",
        "scope": "nodes",
        "nodes": "gpu001,gpu002",
        "collective": "all_reduce",
        "min_bytes": "8",
        "max_bytes": "16G",
        "transport": "sim",
        "cooldown_seconds": "0",
        "duration_seconds": "30",
    }
    response = browser_as(operator).post("/benchmarks/start/", data)
    assert response.status_code == 400 and "duration_seconds" in response.content.decode()
    assert not BenchmarkRun.objects.exists()

    response = browser_as(operator).post("/benchmarks/start/", {**data, "duration_seconds": "1200"})
    run = BenchmarkRun.objects.get()
    assert response.status_code == 302 and run.parameters["duration_seconds"] == 1200
    assert run.parameters["burn_load"] == "gpu-burn" and no_celery == [run.public_id]


@pytest.mark.parametrize(("suite", "case"), [("hpl-mxp", "lu_gflops_per_gpu"), ("hpl", "hpl_gflops_per_gpu")])
def test_hpl_across_a_healthy_set_is_held_to_the_multi_node_model_not_one_nodes_figure(run_suite, suite, case):
    """Across nodes every panel is broadcast over the network, which one node's figure never paid: a healthy rack's
    solve is held to the per-node tiers scaled by the multi-node model, and passes."""
    hosts = [f"gpu{index:03}" for index in range(1, 9)]
    run = run_suite(suite, ",".join(hosts))

    figures_ = figures(run, case)
    one, across = figures_["gpu001"], figures_["+".join(hosts)]
    reference = MeasurementReference.objects.get(sku_name=one.sku_name, suite=suite, case=case)
    assert one.verdict == Verdict.PASS and one.expected == reference.expected
    assert across.expected < reference.expected and across.warn_below < reference.warn_below
    if suite == "hpl-mxp":  # ~87 % of one node's figure, below its pass tier: the per-node tiers warned
        assert across.value < reference.warn_below
    assert across.verdict == Verdict.PASS, (across.value, across.expected, across.warn_below)
    assert across.value == pytest.approx(across.expected, rel=0.1)  # the model and the simulated solve agree
    assert "8 nodes: the per-node tiers x 0." in across.evidence["criterion"]


def test_the_hpl_page_has_no_idle_node_selector_and_its_tier_labels_do_not_overlap(run_suite, browser_as, viewer):
    """Issue 27, walk 11: HPL drew no per-node chart, yet offered a node selector that did nothing; and the expected,
    warn and fail labels, a few percent apart, were written over each other at the same corner."""
    run = run_suite("hpl-mxp", "gpu001,gpu002")
    page = browser_as(viewer).get(f"/benchmarks/runs/{run.public_id}/").content.decode()
    assert 'data-plotly-figure="bar-figure"' in page and 'id="chart-node"' not in page
    figure = json.loads(page.split('<script id="bar-figure" type="application/json">')[1].split("</script>")[0])
    labels = [item for item in figure["layout"]["annotations"] if "below" in item["text"] or "expected" in item["text"]]
    assert len(labels) == 3
    assert {(item["x"], item["xanchor"]) for item in labels} == {(1, "left")}  # in the margin, off the bars
    heights = sorted(item["y"] for item in labels)
    assert all(b - a > 0.05 * heights[-1] for a, b in zip(heights, heights[1:], strict=False))  # each level its own
    assert figure["layout"]["title"]["text"] == "HPL-MxP LU throughput per GPU, each node alone"  # not the field name
    nvbandwidth = run_suite("nvbandwidth", "gpu001,gpu002")
    assert 'id="chart-node"' in browser_as(viewer).get(f"/benchmarks/runs/{nvbandwidth.public_id}/").content.decode()
