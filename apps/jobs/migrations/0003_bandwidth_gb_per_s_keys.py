# A finished nccl-tests cell's event data names its GB/s figure as the benchmarks now do: busbw_gb_per_s, not
# busbw_gbps (gbps read as gigabits). Reversible.

from django.db import migrations

from apps.core.renames import GB_PER_S_KEYS, rename_json_keys


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0002_shard_attempts"),
    ]

    operations = [rename_json_keys("jobs", {"jobevent": ["data"]}, GB_PER_S_KEYS)]
