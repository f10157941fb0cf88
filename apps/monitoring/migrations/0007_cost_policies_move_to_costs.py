"""The cost policies' models now belong to apps.costs (its 0001_initial): they leave monitoring's state only; their
tables and rows stay as they are."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("monitoring", "0006_policy_action_manifest_and_storage_tiering"),
        ("costs", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name="PolicyAction"),
                migrations.DeleteModel(name="CostPolicy"),
            ],
            database_operations=[],
        ),
    ]
