from django.db import migrations

from apps.inventory.catalogue import sync_gpu_skus


def load_catalogue(apps, schema_editor):
    sync_gpu_skus(apps.get_model("inventory", "GpuSku"))


class Migration(migrations.Migration):
    dependencies = [("inventory", "0001_initial")]

    operations = [migrations.RunPython(load_catalogue, migrations.RunPython.noop)]
