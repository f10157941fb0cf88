from django.db import migrations

from apps.benchmarks.references import sync_shipped_measurements


def load_references(apps, schema_editor):
    sync_shipped_measurements(apps.get_model("benchmarks", "MeasurementReference"))


class Migration(migrations.Migration):
    dependencies = [
        ("benchmarks", "0003_measurements"),
    ]

    operations = [migrations.RunPython(load_references, migrations.RunPython.noop)]
