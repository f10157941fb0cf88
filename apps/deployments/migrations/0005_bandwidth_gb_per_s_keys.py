# A cluster acceptance check's details (figures, series, suspects, pairs) name GB/s figures as the benchmarks now
# do: busbw_gb_per_s, not busbw_gbps (gbps read as gigabits). Reversible.

from django.db import migrations

from apps.core.renames import GB_PER_S_KEYS, rename_json_keys


class Migration(migrations.Migration):
    dependencies = [
        ("deployments", "0004_nic_link_errors_criterion"),
    ]

    operations = [rename_json_keys("deployments", {"clusteracceptancecheck": ["details"]}, GB_PER_S_KEYS)]
