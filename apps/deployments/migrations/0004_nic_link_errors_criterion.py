"""Ships the default `nic_link_errors` criterion (cluster acceptance's NIC error counters) on installations whose
defaults were written before it existed; a fresh one has it from 0002 already."""

from django.db import migrations


def add_criterion(apps, schema_editor):
    from apps.deployments.criteria import DEFAULTS

    Criterion = apps.get_model("deployments", "AcceptanceCriterion")
    Criterion.objects.get_or_create(
        sku=None, check_name="nic_link_errors", defaults=dict(DEFAULTS["nic_link_errors"])
    )


def remove_criterion(apps, schema_editor):
    apps.get_model("deployments", "AcceptanceCriterion").objects.filter(check_name="nic_link_errors").delete()


class Migration(migrations.Migration):
    dependencies = [("deployments", "0003_cluster_acceptance_checks")]

    operations = [migrations.RunPython(add_criterion, remove_criterion)]
