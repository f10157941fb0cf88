# A GPU SKU's memory bandwidths hold terabytes per second and its NVLink bandwidth gigabytes per second (the page
# shows TB/s and GB/s); "tbps" and "gbps" read as bits.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("inventory", "0018_storage_tier_bandwidth_gb_per_s"),
    ]

    operations = [
        migrations.RemoveConstraint(model_name="gpusku", name="gpusku_reference_not_above_datasheet"),
        migrations.RenameField(model_name="gpusku", old_name="mem_bandwidth_tbps", new_name="mem_bandwidth_tb_per_s"),
        migrations.RenameField(
            model_name="gpusku", old_name="mem_bandwidth_reference_tbps", new_name="mem_bandwidth_reference_tb_per_s"
        ),
        migrations.RenameField(model_name="gpusku", old_name="nvlink_gbps", new_name="nvlink_gb_per_s"),
        migrations.AddConstraint(
            model_name="gpusku",
            constraint=models.CheckConstraint(
                condition=models.Q(mem_bandwidth_reference_tb_per_s__lte=models.F("mem_bandwidth_tb_per_s")),
                name="gpusku_reference_not_above_datasheet",
                violation_error_message="The achievable bandwidth cannot exceed the datasheet bandwidth.",
            ),
        ),
    ]
