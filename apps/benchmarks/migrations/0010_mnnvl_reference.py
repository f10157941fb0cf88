from django.db import migrations

from apps.benchmarks.references import sync_shipped


def load_references(apps, schema_editor):
    sync_shipped(apps.get_model("benchmarks", "Reference"))  # the new row: GB200 across the trays of a domain (MNNVL)


class Migration(migrations.Migration):
    dependencies = [
        ("benchmarks", "0009_trace_upload"),
    ]

    operations = [migrations.RunPython(load_references, migrations.RunPython.noop)]
