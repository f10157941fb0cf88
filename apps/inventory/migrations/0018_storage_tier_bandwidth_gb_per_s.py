# The storage tier's bandwidths hold gigabytes per second (the page shows GB/s); "gbps" read as gigabits.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("inventory", "0017_node_power_state"),
    ]

    operations = [
        migrations.RemoveConstraint(model_name="storagetier", name="storagetier_bandwidth_positive"),
        migrations.RenameField(model_name="storagetier", old_name="bandwidth_gbps", new_name="bandwidth_gb_per_s"),
        migrations.RenameField(
            model_name="storagetier", old_name="required_bandwidth_gbps", new_name="required_bandwidth_gb_per_s"
        ),
        migrations.AddConstraint(
            model_name="storagetier",
            constraint=models.CheckConstraint(
                condition=models.Q(bandwidth_gb_per_s__gt=0), name="storagetier_bandwidth_positive"
            ),
        ),
    ]
