from django.db import migrations

from apps.benchmarks.references import sync_shipped


def load_references(apps, schema_editor):
    sync_shipped(apps.get_model("benchmarks", "Reference"))


class Migration(migrations.Migration):
    dependencies = [
        ("benchmarks", "0001_initial"),
    ]

    operations = [migrations.RunPython(load_references, migrations.RunPython.noop)]
