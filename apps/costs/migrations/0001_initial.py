"""The cost policies' models move here from apps.monitoring, their rows kept where they are.

The tables stay `monitoring_costpolicy` and `monitoring_policyaction` (each model's `db_table`), so this migration only
tells Django's state that the models are now this app's (SeparateDatabaseAndState: nothing is created) and runs after
the monitoring migrations that made and last changed the tables; monitoring's 0007 takes them out of its own state.
An install that never had the tables gets them from those monitoring migrations, as before. The audit log names a
model by its label, so the entries about policies and actions are renamed to the new labels (and the content types
too), so a policy's history stays its history.
"""

import apps.core.validators
import django.db.models.deletion
import uuid
from django.conf import settings
from django.db import migrations, models

MOVED = ("costpolicy", "policyaction")


def relabel(apps, schema_editor, *, before: str, after: str) -> None:
    """Audit entries and content types named by the old app label take the new one."""
    AuditEntry = apps.get_model("core", "AuditEntry")
    ContentType = apps.get_model("contenttypes", "ContentType")
    for model in MOVED:
        AuditEntry.objects.filter(object_type=f"{before}.{model}").update(object_type=f"{after}.{model}")
        if not ContentType.objects.filter(app_label=after, model=model).exists():
            ContentType.objects.filter(app_label=before, model=model).update(app_label=after)


def forwards(apps, schema_editor) -> None:
    relabel(apps, schema_editor, before="monitoring", after="costs")


def backwards(apps, schema_editor) -> None:
    relabel(apps, schema_editor, before="costs", after="monitoring")


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('contenttypes', '0002_remove_content_type_name'),
        ('core', '0002_audit_actions_and_jobs'),
        ('monitoring', '0006_policy_action_manifest_and_storage_tiering'),
        ('inventory', '0011_rack_mounting'),
        ('jobs', '0002_shard_attempts'),
        ('workloads', '0004_training_progress'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='CostPolicy',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('created', models.DateTimeField(auto_now_add=True)),
                        ('updated', models.DateTimeField(auto_now=True)),
                        ('public_id', models.UUIDField(default=uuid.uuid4, editable=False, unique=True)),
                        ('name', models.CharField(max_length=100, unique=True, validators=[apps.core.validators.NameValidator()])),
                        ('kind', models.CharField(choices=[('low_load_power', 'Energy at low load (GPU power limit)'), ('elastic-scaling', "Elastic scaling (an inference service's replicas)"), ('spot-capacity', 'Spot capacity (preemptible workloads)'), ('storage_tiering', 'Storage tiering (idle files to a colder tier)')], max_length=24)),
                        ('scope', models.CharField(choices=[('cluster', 'Cluster'), ('rack', 'Rack'), ('service', 'Inference service')], default='cluster', max_length=16)),
                        ('parameters', models.JSONField(blank=True, default=dict, help_text="The kind's parameters (docs/costs.md).")),
                        ('standing_approval', models.BooleanField(default=False, help_text="Apply proposals without asking (an admin's decision); reverts never wait.")),
                        ('state', models.CharField(choices=[('enabled', 'Enabled'), ('paused', 'Paused')], default='enabled', max_length=16)),
                        ('last_evaluated', models.DateTimeField(blank=True, null=True)),
                        ('last_outcome', models.CharField(blank=True, help_text='What the last evaluation decided.', max_length=300)),
                        ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                        ('rack', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='cost_policies', to='inventory.rack')),
                        ('service', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='cost_policies', to='workloads.inferenceservice')),
                    ],
                    options={
                        'verbose_name': 'cost policy',
                        'verbose_name_plural': 'cost policies',
                        'db_table': 'monitoring_costpolicy',
                        'ordering': ['name'],
                    },
                ),
                migrations.CreateModel(
                    name='PolicyAction',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('created', models.DateTimeField(auto_now_add=True)),
                        ('updated', models.DateTimeField(auto_now=True)),
                        ('public_id', models.UUIDField(default=uuid.uuid4, editable=False, unique=True)),
                        ('state', models.CharField(choices=[('proposed', 'Proposed'), ('approved', 'Approved'), ('applying', 'Applying'), ('applied', 'Applied'), ('reverting', 'Reverting'), ('reverted', 'Reverted'), ('failed', 'Failed'), ('discarded', 'Discarded')], default='proposed', max_length=16)),
                        ('trigger', models.CharField(choices=[('dry_run', 'Dry run'), ('evaluation', 'Periodic evaluation')], default='dry_run', max_length=16)),
                        ('reason', models.CharField(help_text='Why the policy proposed it, from the telemetry.', max_length=300)),
                        ('plan', models.JSONField(default=list, help_text='Per GPU: hostname, gpu, sku, from_w, to_w, mean utilisation and power.')),
                        ('commands', models.JSONField(default=dict, help_text='hostname -> the command lines applying it runs there.')),
                        ('revert_commands', models.JSONField(default=dict, help_text='hostname -> the command lines reverting it runs.')),
                        ('notes', models.JSONField(default=list, help_text='Nodes left out, and why.')),
                        ('window_seconds', models.PositiveIntegerField(help_text='The telemetry window the proposal was judged over.')),
                        ('expected_kwh_per_day', models.FloatField(help_text="Expected saving at the window's load, per day.")),
                        ('price_per_kwh', models.FloatField(help_text='RACKPILOT_ENERGY_PRICE_PER_KWH when it was proposed.')),
                        ('currency', models.CharField(blank=True, max_length=8)),
                        ('throughput_factor', models.FloatField(default=1.0, help_text="Under full load, the share of today's throughput the lowered clocks keep.")),
                        ('approval', models.CharField(blank=True, choices=[('operator', 'An operator'), ('standing', 'Standing approval')], max_length=16)),
                        ('approved_by_name', models.CharField(blank=True, help_text='Kept when the user is deleted.', max_length=150)),
                        ('approved_at', models.DateTimeField(blank=True, null=True)),
                        ('applied_at', models.DateTimeField(blank=True, null=True)),
                        ('reapplied_at', models.DateTimeField(blank=True, help_text='Last put back after a node forgot it.', null=True)),
                        ('reapplied_count', models.PositiveIntegerField(default=0)),
                        ('reverted_at', models.DateTimeField(blank=True, null=True)),
                        ('revert_reason', models.CharField(blank=True, max_length=300)),
                        ('message', models.CharField(blank=True, help_text='How the last run ended.', max_length=300)),
                        ('manifest', models.JSONField(blank=True, default=list, help_text='Storage tiering: the files applying moved (source, destination, bytes).')),
                        ('apply_job', models.ForeignKey(blank=True, help_text='The last apply.', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='jobs.job')),
                        ('approved_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                        ('policy', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='actions', to='costs.costpolicy')),
                        ('requested_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                        ('revert_job', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='jobs.job')),
                    ],
                    options={
                        'verbose_name': 'policy action',
                        'db_table': 'monitoring_policyaction',
                        'ordering': ['-created', '-pk'],
                    },
                ),
                migrations.AddConstraint(
                    model_name='costpolicy',
                    constraint=models.CheckConstraint(condition=models.Q(models.Q(('scope', 'rack'), ('rack__isnull', False), ('service__isnull', True)), models.Q(('scope', 'service'), ('service__isnull', False), ('rack__isnull', True)), models.Q(('scope', 'cluster'), ('rack__isnull', True), ('service__isnull', True)), _connector='OR'), name='costpolicy_scope_names_its_object'),
                ),
                migrations.AddConstraint(
                    model_name='policyaction',
                    constraint=models.CheckConstraint(condition=models.Q(('window_seconds__gte', 1)), name='policyaction_window_positive'),
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(forwards, backwards),
    ]
