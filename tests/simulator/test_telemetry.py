"""The simulated GPUs' and services' telemetry: a model of load, faults and time, in the real exporters' formats."""

import re
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from apps.inventory.demo import ClusterShape, load_cluster
from apps.inventory.models import Node
from apps.nodeexec.sim_telemetry import ServingRun, TrainingRun, Workloads, split_counters
from apps.parsers.dcgm_exporter import parse_dcgm_exporter
from apps.simulator import services
from apps.simulator.exporters import ExporterServer, NodeSilent, dcgm_exposition, node_exposition, vllm_exposition
from apps.simulator.model import REASON_BITS
from tests.conftest import Clock

pytestmark = pytest.mark.django_db
TELEMETRY_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "telemetry"
STARTED = Clock.START.timestamp() - 7200  # the workloads run from two hours before the test's clock starts
T0 = Clock.START.timestamp() + 3600  # an hour after the nodes' rows (their boot) and the faults are stamped
SERVING = ("gpu001", "gpu002")
TRAINING = ("gpu003", "gpu004")
WORKLOADS = Workloads(
    training=(TrainingRun("pretrain", TRAINING, STARTED),),
    serving=(ServingRun("chat", "meta-llama/Llama-3.1-70B-Instruct", SERVING, 5000.0, STARTED),),
)


@pytest.fixture
def cluster(clock, db):
    """The nodes' rows, stamped at the clock's start (their boot), as are the faults the tests inject."""
    load_cluster(ClusterShape(compute_nodes=5, nodes_per_rack=5, management_nodes=0))


def model(seed=0):
    return services.telemetry_model(workloads=WORKLOADS, seed=seed)


def inject(hostname, kind, target="", **parameters):
    return services.inject_fault(
        node=Node.objects.get(hostname=hostname), kind=kind, target=target, parameters=parameters
    )


def labels_of(text: str) -> set[str]:
    return {name for name in re.findall(r'[{,]\s*([A-Za-z_]+)="', text)}


def test_the_dcgm_page_reads_as_dcgm_exporters_with_its_names_and_labels(cluster):
    page = dcgm_exposition(model(), "gpu003", T0)
    parsed = parse_dcgm_exporter(page)
    assert parsed.gpus() == [str(index) for index in range(8)]
    for name in ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_DEV_POWER_USAGE"):
        assert len(parsed.values(name)) == 8
    energy = parsed.values("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION")[0]
    assert energy.labels["Hostname"] == "gpu003" and energy.labels["modelName"] == "NVIDIA H200"
    assert {family.name: family.type for family in parsed.families}["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"] == "counter"
    # The real exporter's labels (a GPU Operator capture without pod attribution has exactly these).
    capture = (
        TELEMETRY_FIXTURES
        / "dcgm-exporter-prof"
        / "dcgm-exporter-l40s-gr-engine-active-custom-help-pod-labels-openshift-dcgm-issue226-partial.txt"
    ).read_text()
    # The per-link NVLink state adds the link entity's label (`nvlink`), as dcgm-exporter labels link fields.
    assert labels_of(page) == labels_of(capture.splitlines()[-1]) | {"nvlink"}
    assert 85 <= parsed.values("DCGM_FI_DEV_GPU_UTIL")[0].value <= 100  # a training rank is busy


def test_an_idle_node_idles_and_a_training_node_draws_power_near_its_cap(cluster):
    telemetry = model()
    idle, busy = telemetry.gpu_reading("gpu005", 0, T0), telemetry.gpu_reading("gpu003", 0, T0)
    assert idle["util"] == 0 and idle["sm_mhz"] == 345 and idle["reasons"] == REASON_BITS["gpu_idle"]
    assert 70 < idle["power_w"] < 90
    assert 600 < busy["power_w"] <= 700 and busy["reasons"] & REASON_BITS["sw_power_cap"]


def test_the_energy_counter_is_monotonic_and_the_integral_of_power(cluster):
    telemetry = model()
    counters = [telemetry.energy_counter_mj("gpu003", 0, T0 + k * 30) for k in range(21)]
    assert counters == sorted(counters)
    # Trapezoids of the power gauge's model over 600 s against the counter's delta.
    powers = [telemetry.power_w("gpu003", 0, T0 + k) for k in range(601)]
    trapezoids = sum((a + b) / 2 for a, b in zip(powers, powers[1:], strict=False))
    assert (counters[-1] - counters[0]) / 1000 == pytest.approx(trapezoids, rel=1e-4)


def test_a_straggler_lowers_the_utilisation_of_the_other_ranks(cluster):
    before = model().gpu_reading("gpu003", 0, T0)["util"]
    fault = inject("gpu004", "straggler")
    after = model()
    t = fault.created.timestamp() + 1
    assert after.gpu_reading("gpu003", 0, t)["util"] < before * 0.85  # waiting for gpu004 at every all-reduce
    assert after.gpu_reading("gpu004", 0, t)["sm_mhz"] <= 1095
    assert after.gpu_reading("gpu003", 0, fault.created.timestamp() - 60)["util"] == pytest.approx(
        model().gpu_reading("gpu003", 0, fault.created.timestamp() - 60)["util"]
    )  # the past is as it was


def test_a_power_cap_lowers_clocks_and_the_services_capacity(cluster):
    run = WORKLOADS.serving[0]
    healthy = model().service_capacity(run, T0)
    fault = inject("gpu001", "power_cap", "0", watts=400)
    t = fault.created.timestamp() + 1
    capped = model()
    reading = capped.gpu_reading("gpu001", 0, t)
    assert reading["power_limit_w"] == 400 and reading["power_w"] <= 400
    assert reading["reasons"] & REASON_BITS["sw_power_cap"]
    assert capped.service_capacity(run, t) < healthy * 0.95


def test_xid_and_ecc_faults_show_in_their_fields(cluster):
    inject("gpu005", "ecc", "2", count=3)
    fault = inject("gpu005", "xid79", "5")
    page = dcgm_exposition(model(), "gpu005", fault.created.timestamp() + 1)
    parsed = parse_dcgm_exporter(page)
    xids = {sample.gpu: sample.value for sample in parsed.values("DCGM_FI_DEV_XID_ERRORS")}
    assert xids["5"] == 79 and xids["2"] == 48 and xids["0"] == 0
    assert "5" not in {sample.gpu for sample in parsed.values("DCGM_FI_DEV_GPU_UTIL")}  # off the bus: no readings
    dbe = {sample.gpu: sample.value for sample in parsed.values("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL")}
    assert dbe["2"] == 3


def test_the_node_exporter_page_shows_a_degraded_cables_rate_and_its_growing_crc_errors(cluster):
    fault = inject("gpu002", "degraded_cable", "ens4np0", rate_gbps=200, crc_per_million=100)
    t = fault.created.timestamp()
    pages = [node_exposition(model(), "gpu002", t + seconds) for seconds in (-1, 60, 120)]
    samples = [
        {
            (sample.name, sample.labels["device"]): sample.value
            for family in text_string_to_metric_families(page)
            for sample in family.samples
        }
        for page in pages
    ]
    families = {family.name: family.type for family in text_string_to_metric_families(pages[0])}
    assert families["node_network_speed_bytes"] == "gauge" and families["node_network_receive_errs"] == "counter"
    before, later, latest = samples
    assert before[("node_network_speed_bytes", "ens4np0")] == 400 * 125_000_000
    assert later[("node_network_speed_bytes", "ens4np0")] == 200 * 125_000_000
    assert later[("node_network_speed_bytes", "ens3np0")] == 400 * 125_000_000  # the other links as planned
    errors = [one[("node_network_receive_errs_total", "ens4np0")] for one in samples]
    assert errors[0] == 0 < errors[1] < errors[2]
    assert latest[("node_network_receive_errs_total", "ens3np0")] == 0
    rdma_rates = sorted(value for (name, _), value in later.items() if name == "node_infiniband_rate_bytes_per_second")
    assert rdma_rates[0] == 200 * 125_000_000 and rdma_rates[1] == 400 * 125_000_000  # its RDMA device's, too


def test_the_vllm_page_has_vllms_names_and_consistent_histograms(cluster):
    page = vllm_exposition(model(), "chat", T0)
    families = {family.name: family for family in text_string_to_metric_families(page)}
    for name in (
        "vllm:generation_tokens",
        "vllm:prompt_tokens",
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
    ):
        assert name in families
    assert "vllm:generation_tokens_total{" in page and "vllm:e2e_request_latency_seconds_bucket{" in page
    histogram = families["vllm:e2e_request_latency_seconds"]
    buckets = [sample.value for sample in histogram.samples if sample.name.endswith("_bucket")]
    assert buckets == sorted(buckets) and buckets[-1] > 0
    assert all(sample.labels["model_name"] == "meta-llama/Llama-3.1-70B-Instruct" for sample in histogram.samples)
    assert "vllm:time_to_first_token_seconds" in families


def test_counters_reset_once_a_day_when_the_service_restarts(cluster):
    telemetry = model()
    run = WORKLOADS.serving[0]
    restart = telemetry.restarted(run, T0 + 86400)
    before = split_counters(telemetry.service_counters(run, restart - 1))["generation_tokens"]
    after = split_counters(telemetry.service_counters(run, restart + 60))["generation_tokens"]
    assert after < before and after > 0


def test_same_seed_same_figures_other_seed_other_noise(cluster):
    assert dcgm_exposition(model(seed=1), "gpu001", T0) == dcgm_exposition(model(seed=1), "gpu001", T0)
    assert dcgm_exposition(model(seed=1), "gpu001", T0) != dcgm_exposition(model(seed=2), "gpu001", T0)


def test_a_hung_node_has_no_series_and_its_exporters_do_not_answer(cluster):
    fault = inject("gpu003", "node_hang")
    hung, before = fault.created.timestamp() + 30, fault.created.timestamp() - 30
    telemetry = model()
    keys = frozenset({"util", "power_w"})
    # a training node until the OS hung: healthy load, then nothing at all (a target down, not 8 idle GPUs)
    assert [reading["util"] > 50 for _, reading in telemetry.node_readings("gpu003", before, keys=keys)] == [True] * 8
    assert telemetry.node_readings("gpu003", hung, keys=keys) == []
    assert telemetry.nic_readings("gpu003", hung) == []
    ((_, _, _, counters),) = telemetry.samples("gpu003", [hung])
    assert counters == {}
    assert len(telemetry.node_readings("gpu004", hung, keys=keys)) == 8  # its peers still report

    server = ExporterServer(build=lambda workloads: model(), workloads=lambda: WORKLOADS)
    try:
        with pytest.raises(NodeSilent, match="gpu003 does not answer"):
            server.page("/nodes/gpu003/metrics")
        with pytest.raises(NodeSilent):
            server.page("/nodes/gpu003/node-metrics")
        assert "DCGM_FI_DEV_GPU_UTIL" in server.page("/nodes/gpu004/metrics")
        server.start()
        with pytest.raises(urllib.error.HTTPError) as failed:
            urllib.request.urlopen(f"http://127.0.0.1:{server.port}/nodes/gpu003/metrics", timeout=10)
        assert failed.value.code == 503  # the scrape fails: Prometheus marks the target down
    finally:
        server.stop()


def test_the_exporters_rebuild_their_model_only_when_what_it_is_built_from_moved(cluster):
    workloads = [WORKLOADS]
    server = ExporterServer(
        build=lambda workloads: services.telemetry_model(workloads=workloads),
        workloads=lambda: workloads[0],
        stamp=services.telemetry_inputs_stamp,
        refresh=3600,  # the test checks by hand
    )
    try:
        served = server.model()
        server.refresh_model()
        assert (server.model(), server.builds) == (served, 1)  # the clock moved, nothing else: the same model

        inject("gpu003", "node_hang")  # an audited change
        server.refresh_model()
        assert server.builds == 2
        with pytest.raises(NodeSilent):
            server.page("/nodes/gpu003/metrics")

        gpu004 = Node.objects.get(hostname="gpu004")
        services.bmc_power(node=gpu004, action="off")  # a simulated change, written without an audit entry
        server.refresh_model()
        assert server.builds == 3
        with pytest.raises(NodeSilent):
            server.page("/nodes/gpu004/metrics")

        workloads[0] = Workloads(serving=WORKLOADS.serving)  # the training job ended
        server.refresh_model()
        assert server.builds == 4
        assert server.model().workloads.training == ()

        server.refresh_model()
        assert server.builds == 4
    finally:
        server.stop()
