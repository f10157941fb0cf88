from django.db import migrations

from apps.remediation import defaults


def ship_defaults(apps, schema_editor):
    # The new ones: NVLink links degraded (a compute tray's or GPU's), NVLink switch tray down, IMEX peer lost.
    defaults.ship_defaults(apps.get_model("remediation", "RemediationPolicy"))


class Migration(migrations.Migration):
    dependencies = [
        ("remediation", "0008_defer_into_maintenance_windows"),
    ]

    operations = [
        migrations.RunPython(ship_defaults, migrations.RunPython.noop),
    ]
