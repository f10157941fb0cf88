"""Ships the default acceptance criteria as rows (admins add per-SKU rows over the API)."""

from django.db import migrations


def add_defaults(apps, schema_editor):
    from apps.deployments.criteria import DEFAULTS

    Criterion = apps.get_model("deployments", "AcceptanceCriterion")
    for check_name, values in DEFAULTS.items():
        Criterion.objects.update_or_create(sku=None, check_name=check_name, defaults=dict(values))


def remove_defaults(apps, schema_editor):
    apps.get_model("deployments", "AcceptanceCriterion").objects.filter(sku=None).delete()


class Migration(migrations.Migration):
    dependencies = [("deployments", "0001_initial")]

    operations = [migrations.RunPython(add_defaults, remove_defaults)]
