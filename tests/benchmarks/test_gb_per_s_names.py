"""Bandwidths in bytes are named `_gb_per_s` / `_tb_per_s` ("gbps" reads as gigabits): the migrations rename the keys
inside stored results and back, leave link rates in Gb/s as they are, and the shipped rows still fill a migration's
model that has the old names."""

import importlib

import pytest
from django.apps import apps as live_apps
from django.db import connection, migrations
from django.db.migrations.loader import MigrationLoader

from apps.benchmarks.choices import Suite, Verdict
from apps.benchmarks.models import BenchmarkRun, BenchmarkTest, Suspect
from apps.benchmarks.references import shipped_rows
from apps.core.renames import as_model_fields
from apps.inventory.catalogue import GPU_SKUS
from apps.jobs.models import Job, JobEvent
from tests.factories import make_node

pytestmark = pytest.mark.django_db

KEY_MIGRATIONS = [
    "apps.benchmarks.migrations.0011_bandwidth_gb_per_s",
    "apps.deployments.migrations.0005_bandwidth_gb_per_s_keys",
    "apps.health.migrations.0005_bandwidth_gb_per_s_keys",
    "apps.jobs.migrations.0003_bandwidth_gb_per_s_keys",
]


def _key_step(module: str) -> migrations.RunPython:
    operations = importlib.import_module(module).Migration.operations
    return next(operation for operation in operations if isinstance(operation, migrations.RunPython))


def _forward(module: str) -> None:
    _key_step(module).code(live_apps, None)


def _backward(module: str) -> None:
    _key_step(module).reverse_code(live_apps, None)


def test_a_tests_stored_results_are_rewritten_to_the_new_keys_and_back():
    job = Job.objects.create(kind="nccl-tests", transport="sim")
    series = [{"size_bytes": 1024, "algbw_gbps": 10.0, "busbw_gbps": 18.75, "in_place_busbw_gbps": 18.5}]
    findings = [{"nic": "ens1np0", "rail_busbw_gbps": 40.0, "link_gbps": 200, "planned_gbps": 400}]
    test = BenchmarkTest.objects.create(
        job=job, launcher="gpu001", hosts=["gpu001"], collective="all_reduce", series=series, nic_findings=findings
    )
    untouched = BenchmarkTest.objects.create(
        job=job, launcher="gpu002", hosts=["gpu002"], collective="all_reduce", series=[{"size_bytes": 8}]
    )
    run = BenchmarkRun.objects.create(suite=Suite.SWEEP, transport="sim")
    suspect = Suspect.objects.create(
        run=run, node=make_node(), verdict=Verdict.FAIL, evidence={"first": {"partner": "gpu009", "busbw_gbps": 90.0}}
    )
    module = "apps.benchmarks.migrations.0011_bandwidth_gb_per_s"

    _forward(module)

    test.refresh_from_db()
    suspect.refresh_from_db()
    assert test.series == [
        {"size_bytes": 1024, "algbw_gb_per_s": 10.0, "busbw_gb_per_s": 18.75, "in_place_busbw_gb_per_s": 18.5}
    ]
    # A NIC's link rate is in gigabits and keeps its name.
    assert test.nic_findings == [{"nic": "ens1np0", "rail_busbw_gb_per_s": 40.0, "link_gbps": 200, "planned_gbps": 400}]
    assert suspect.evidence == {"first": {"partner": "gpu009", "busbw_gb_per_s": 90.0}}
    untouched.refresh_from_db()
    assert untouched.series == [{"size_bytes": 8}]

    _backward(module)

    test.refresh_from_db()
    suspect.refresh_from_db()
    assert test.series == series and test.nic_findings == findings
    assert suspect.evidence == {"first": {"partner": "gpu009", "busbw_gbps": 90.0}}


def test_a_cells_finished_event_is_rewritten_to_the_new_key_and_back():
    job = Job.objects.create(kind="nccl-tests", transport="sim")
    event = JobEvent.objects.create(job=job, seq=1, data={"busbw_gbps": 361.2, "size_bytes": 2**30})
    module = "apps.jobs.migrations.0003_bandwidth_gb_per_s_keys"

    _forward(module)
    event.refresh_from_db()
    assert event.data == {"busbw_gb_per_s": 361.2, "size_bytes": 2**30}

    _backward(module)
    event.refresh_from_db()
    assert event.data == {"busbw_gbps": 361.2, "size_bytes": 2**30}


@pytest.mark.parametrize("module", KEY_MIGRATIONS)
def test_every_key_migration_names_models_and_fields_that_exist(module):
    _forward(module)
    _backward(module)


def test_shipped_rows_fill_a_migrations_model_that_has_the_old_names():
    """The data migrations that load the catalogue and the references run before the rename (inventory 0002, benchmarks
    0002 and 0010): their historical models still have mem_bandwidth_tbps, expected_gbps, ..."""
    state = MigrationLoader(connection).project_state(
        [("inventory", "0018_storage_tier_bandwidth_gb_per_s"), ("benchmarks", "0010_mnnvl_reference")]
    )
    sku = as_model_fields(state.apps.get_model("inventory", "GpuSku"), GPU_SKUS[0])
    assert sku["mem_bandwidth_tbps"] == GPU_SKUS[0]["mem_bandwidth_tb_per_s"]
    assert sku["nvlink_gbps"] == 900 and "nvlink_gb_per_s" not in sku
    reference = as_model_fields(state.apps.get_model("benchmarks", "Reference"), shipped_rows()[0])
    assert {"expected_gbps", "warn_gbps", "fail_gbps"} <= set(reference)
    assert not {"expected_gb_per_s", "warn_gb_per_s", "fail_gb_per_s"} & set(reference)
