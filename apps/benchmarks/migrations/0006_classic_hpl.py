"""Classic HPL as a suite (xhpl, FP64) and its shipped references per SKU."""


from django.conf import settings
from django.db import migrations, models

from apps.benchmarks.references import sync_shipped_measurements


def load_references(apps, schema_editor):
    sync_shipped_measurements(apps.get_model("benchmarks", "MeasurementReference"))


class Migration(migrations.Migration):

    dependencies = [
        ('benchmarks', '0005_timeline_analyses'),
        ('inventory', '0010_gpusku_min_power_limit'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='benchmarkrun',
            name='benchmark_run_suite_known',
        ),
        migrations.AlterField(
            model_name='benchmarkrun',
            name='suite',
            field=models.CharField(choices=[('nccl', 'NCCL tests (one node, or a set of nodes with mpirun)'), ('nccl-sweep', 'NCCL sweep: find the slow node or link by halving'), ('nccl-pairwise', 'NCCL pairwise: every pair of a small set'), ('hpl-mxp', 'HPL-MxP: mixed-precision LU on each node, then across the set'), ('hpl', 'HPL: classic FP64 Linpack (xhpl) on each node, then across the set'), ('nvbandwidth', 'nvbandwidth: host and device copy bandwidth of each node'), ('burn-in', 'Burn-in soak: gpu_burn with clocks and temperatures sampled')], max_length=16),
        ),
        migrations.AlterField(
            model_name='measurement',
            name='suite',
            field=models.CharField(choices=[('nccl', 'NCCL tests (one node, or a set of nodes with mpirun)'), ('nccl-sweep', 'NCCL sweep: find the slow node or link by halving'), ('nccl-pairwise', 'NCCL pairwise: every pair of a small set'), ('hpl-mxp', 'HPL-MxP: mixed-precision LU on each node, then across the set'), ('hpl', 'HPL: classic FP64 Linpack (xhpl) on each node, then across the set'), ('nvbandwidth', 'nvbandwidth: host and device copy bandwidth of each node'), ('burn-in', 'Burn-in soak: gpu_burn with clocks and temperatures sampled')], max_length=16),
        ),
        migrations.AlterField(
            model_name='measurementbaseline',
            name='suite',
            field=models.CharField(choices=[('nccl', 'NCCL tests (one node, or a set of nodes with mpirun)'), ('nccl-sweep', 'NCCL sweep: find the slow node or link by halving'), ('nccl-pairwise', 'NCCL pairwise: every pair of a small set'), ('hpl-mxp', 'HPL-MxP: mixed-precision LU on each node, then across the set'), ('hpl', 'HPL: classic FP64 Linpack (xhpl) on each node, then across the set'), ('nvbandwidth', 'nvbandwidth: host and device copy bandwidth of each node'), ('burn-in', 'Burn-in soak: gpu_burn with clocks and temperatures sampled')], max_length=16),
        ),
        migrations.AlterField(
            model_name='measurementreference',
            name='suite',
            field=models.CharField(choices=[('nccl', 'NCCL tests (one node, or a set of nodes with mpirun)'), ('nccl-sweep', 'NCCL sweep: find the slow node or link by halving'), ('nccl-pairwise', 'NCCL pairwise: every pair of a small set'), ('hpl-mxp', 'HPL-MxP: mixed-precision LU on each node, then across the set'), ('hpl', 'HPL: classic FP64 Linpack (xhpl) on each node, then across the set'), ('nvbandwidth', 'nvbandwidth: host and device copy bandwidth of each node'), ('burn-in', 'Burn-in soak: gpu_burn with clocks and temperatures sampled')], max_length=16),
        ),
        migrations.AddConstraint(
            model_name='benchmarkrun',
            constraint=models.CheckConstraint(condition=models.Q(('suite__in', ['nccl', 'nccl-sweep', 'nccl-pairwise', 'hpl-mxp', 'hpl', 'nvbandwidth', 'burn-in'])), name='benchmark_run_suite_known'),
        ),
        migrations.RunPython(load_references, migrations.RunPython.noop),
    ]
