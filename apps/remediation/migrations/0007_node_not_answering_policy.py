from django.db import migrations

from apps.remediation import defaults


def ship_defaults(apps, schema_editor):
    defaults.ship_defaults(apps.get_model("remediation", "RemediationPolicy"))  # the new one: Node not answering


class Migration(migrations.Migration):
    dependencies = [
        ("remediation", "0006_repairs"),
    ]

    operations = [
        migrations.RunPython(ship_defaults, migrations.RunPython.noop),
    ]
