"""The policies moved from apps.monitoring to apps.costs without touching their rows: an install that made policies
before the move finds them, their actions and their audit history after it."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from apps.core.models import AuditEntry
from apps.costs.models import CostPolicy

LAST_IN_MONITORING = ("monitoring", "0006_policy_action_manifest_and_storage_tiering")


def migrate(targets):
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    return executor.loader.project_state([target for target in targets if target[1]]).apps


@pytest.mark.django_db(transaction=True)
def test_a_policy_made_before_the_move_keeps_its_rows_and_history():
    latest = MigrationExecutor(connection).loader.graph.leaf_nodes()
    old = migrate([LAST_IN_MONITORING, ("costs", None)])
    try:
        OldPolicy = old.get_model("monitoring", "CostPolicy")
        OldAction = old.get_model("monitoring", "PolicyAction")
        policy = OldPolicy.objects.create(name="night-cap", kind="low_load_power", parameters={"power_limit_w": 400})
        OldAction.objects.create(
            policy=policy, reason="low load", window_seconds=3600, expected_kwh_per_day=1.5, price_per_kwh=0.15
        )
        AuditEntry.objects.create(action="create", object_type="monitoring.costpolicy", object_id=str(policy.pk))
    finally:
        migrate(latest)

    moved = CostPolicy.objects.get(name="night-cap")
    assert moved.public_id == policy.public_id and moved.parameters == {"power_limit_w": 400}
    assert [action.reason for action in moved.actions.all()] == ["low load"]
    assert AuditEntry.objects.for_object(moved).count() == 1  # the history is found under the new label
