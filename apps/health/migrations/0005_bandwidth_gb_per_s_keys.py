# A health event's evidence (a slow sweep's figures) names GB/s figures as the benchmarks now do: busbw_gb_per_s,
# not busbw_gbps (gbps read as gigabits). Reversible.

from django.db import migrations

from apps.core.renames import GB_PER_S_KEYS, rename_json_keys


class Migration(migrations.Migration):
    dependencies = [
        ("health", "0004_inventory_health_from_events"),
    ]

    operations = [rename_json_keys("health", {"healthevent": ["evidence", "clear_evidence"]}, GB_PER_S_KEYS)]
