# Bus bandwidths and their tiers hold gigabytes per second (the pages show GB/s); "gbps" read as gigabits. The
# fields are renamed, and so are the keys that carry them inside stored results (series, findings, evidence).

from django.db import migrations, models

from apps.core.renames import GB_PER_S_KEYS, rename_json_keys

RENAMED = {
    "reference": ["expected_gbps", "warn_gbps", "fail_gbps"],
    "benchmarktest": ["busbw_gbps", "avg_busbw_gbps", "expected_gbps", "warn_gbps", "fail_gbps", "baseline_gbps"],
    "suspect": ["busbw_gbps", "expected_gbps"],
    "baseline": ["busbw_gbps"],
}


class Migration(migrations.Migration):
    dependencies = [
        ("benchmarks", "0010_mnnvl_reference"),
    ]

    operations = [
        migrations.RemoveConstraint(model_name="reference", name="benchmark_reference_tiers_ordered"),
        *(
            migrations.RenameField(model_name=model, old_name=name, new_name=GB_PER_S_KEYS[name])
            for model, names in RENAMED.items()
            for name in names
        ),
        migrations.AddConstraint(
            model_name="reference",
            constraint=models.CheckConstraint(
                condition=models.Q(fail_gb_per_s__lte=models.F("warn_gb_per_s"))
                & models.Q(warn_gb_per_s__lte=models.F("expected_gb_per_s"))
                & models.Q(fail_gb_per_s__gte=0),
                name="benchmark_reference_tiers_ordered",
                violation_error_message="Tiers must satisfy 0 ≤ fail ≤ warn ≤ expected.",
            ),
        ),
        rename_json_keys(
            "benchmarks",
            {"benchmarktest": ["series", "nic_findings", "evidence"], "suspect": ["evidence"]},
            GB_PER_S_KEYS,
        ),
    ]
