"""dcgm-exporter's Prometheus text, including excerpts and DCGM's blank sentinels."""

from apps.parsers.dcgm_exporter import parse_dcgm_exporter

from .helpers import assert_parse_error, real


def test_mig_samples_keep_all_labels():
    metrics = parse_dcgm_exporter(real("dcgm-exporter/dcgm-exporter-h100-mig-gr-engine-active-partial-issue512.txt"))

    [family] = metrics.families
    assert (family.name, family.type) == ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge")
    assert family.help == "Ratio of time the graphics engine is active."
    assert [sample.labels["GPU_I_ID"] for sample in metrics.samples] == ["7", "8", "9"]
    assert metrics.samples[0].labels["pod"] == "text-embedding-predictor-00008-deployment-57946f6c67-vdtjl"
    assert "pod" not in metrics.samples[1].labels
    assert metrics.samples[0].value == 0.0


def test_several_families_per_gpu():
    metrics = parse_dcgm_exporter(real("dcgm-exporter/dcgm-exporter-v100-sxm2-4gpu-partial-issue250.txt"))

    assert metrics.gpus() == ["0", "1", "2", "3"]
    assert [sample.value for sample in metrics.values("DCGM_FI_DEV_POWER_MGMT_LIMIT")] == [300.0, 300.0]
    assert {family.type for family in metrics.families if family.type} == {"gauge", "counter"}


def test_blank_sentinel_becomes_none_and_elisions_are_skipped():
    metrics = parse_dcgm_exporter(real("dcgm-exporter/dcgm-exporter-readme-quickstart-elided-partial.txt"))

    values = {sample.name: sample.value for sample in metrics.samples}
    assert values == {"DCGM_FI_DEV_SM_CLOCK": 139.0, "DCGM_FI_DEV_MEM_CLOCK": 405.0, "DCGM_FI_DEV_MEMORY_TEMP": None}
    assert metrics.blank_samples == 1
    assert metrics.values("DCGM_FI_DEV_MEMORY_TEMP")[0].raw_value == "9223372036854775794"


def test_malformed_lines_are_rejected_with_their_number():
    good = real("dcgm-exporter/dcgm-exporter-a30-mig-fb-used-partial-issue317.txt")

    assert_parse_error(parse_dcgm_exporter, good + 'DCGM_FI_DEV_FB_USED{gpu="0" 3\n', 8, "metric line")
    assert_parse_error(parse_dcgm_exporter, good + 'DCGM_FI_DEV_FB_USED{gpu="0"} lots\n', 8, "numeric sample")


def test_not_dcgm_exporter_output_is_rejected():
    assert_parse_error(parse_dcgm_exporter, "", 1, "empty input")
    assert_parse_error(parse_dcgm_exporter, "node_load1 0.5\n", 1, "dcgm-exporter metrics")
    assert_parse_error(parse_dcgm_exporter, real("h200-1gpu/numactl-H.txt"), 1, "metric line")
