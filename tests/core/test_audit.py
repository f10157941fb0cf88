"""The audit hook never turns a delete into an error: it names objects from the values it has, even when a row
they refer to was deleted meanwhile (a node deleted while its NICs are deleted in parallel)."""

import pytest
from django.db.models.signals import pre_delete

from apps.core.choices import AuditAction
from apps.core.models import AuditEntry
from apps.inventory.models import Cable, Nic, Node
from tests import factories
from tests.inventory.factories import make_cable


@pytest.fixture
def cabled_node(db):
    node = factories.make_node(hostname="del1")
    switch = factories.make_switch()
    nics = [factories.make_nic(node=node) for _ in range(3)]
    cables = [make_cable(a_nic=nic, b_switch=switch, b_port=f"swp{i}") for i, nic in enumerate(nics)]
    return node, nics, cables


@pytest.mark.django_db(transaction=True)
def test_deleting_a_node_whose_nics_vanish_meanwhile_succeeds_and_is_audited(api_as, admin, cabled_node):
    """Deterministic stand-in for the race: when the node's delete sends its first pre_delete (the rows to delete
    already collected), the NICs and their cables are deleted, as a parallel request would. The audit hook then
    meets cables whose NIC row is gone."""
    node, nics, cables = cabled_node
    fired = []

    def vanish(sender, instance, **kwargs):
        if fired:
            return
        fired.append(sender)
        Nic.objects.filter(node_id=node.pk).delete()

    pre_delete.connect(vanish, dispatch_uid="test-audit-vanish")
    try:
        response = api_as(admin).delete(f"/api/nodes/{node.public_id}/")
    finally:
        pre_delete.disconnect(dispatch_uid="test-audit-vanish")
    assert response.status_code == 204, response.content[:2000]
    assert not Node.objects.filter(pk=node.pk).exists()
    assert not Cable.objects.filter(pk__in=[c.pk for c in cables]).exists()
    entries = AuditEntry.objects.filter(action=AuditAction.DELETE, object_type="inventory.cable")
    # Every cable's delete is on record, named by its own values when its NIC could not be read any more.
    assert {c.pk for c in cables} <= {int(pk) for pk in entries.values_list("object_id", flat=True)}
    assert AuditEntry.objects.filter(action=AuditAction.DELETE, object_type="inventory.node", object_id=str(node.pk))


def test_a_cable_whose_nic_row_is_gone_is_named_by_its_ids(db, cabled_node):
    from apps.core.audit import describe

    node, nics, cables = cabled_node
    stale = Cable.objects.get(pk=cables[0].pk)  # loaded without its NIC, as a delete's collector loads it
    Cable.objects.filter(pk=stale.pk).delete()
    Nic.objects.filter(pk=nics[0].pk).delete()
    text = describe(stale)
    assert f"#{stale.pk}" in text and f"a_nic={nics[0].pk}" in text
