"""The topology is recorded when what it is worked out from changes: a node, a switch, a NIC, a cable, a GPU, a storage
tier, a rack, a site, an NVLink domain, switch tray or partition saved or deleted, or a NIC's GPU peers or a
partition's trays changed, records it once the transaction commits (once a transaction, however many rows it
changed), in the background (the task `rackpilot.topology.record`). What a bulk update changes (no signal), and a
link fault measured in an NVLink domain (a health event), are recorded by the same task's run every minute."""

from django.db import transaction
from django.db.models.signals import m2m_changed, post_delete, post_save

from apps.inventory.models import (
    Cable,
    Gpu,
    Nic,
    Node,
    NvlinkDomain,
    NvlinkPartition,
    NvlinkSwitchTray,
    Rack,
    Site,
    StorageTier,
    Switch,
)
from apps.topology.tasks import record

WATCHED = (Node, Switch, Nic, Cable, Gpu, StorageTier, Rack, Site, NvlinkDomain, NvlinkSwitchTray, NvlinkPartition)


def _inventory_changed(**kwargs) -> None:
    connection = transaction.get_connection()
    pending = getattr(connection, "topology_recording", None)
    if pending is not None and any(entry[1] is pending for entry in connection.run_on_commit):
        return  # already due when this transaction commits (a rolled-back one's is gone, and is sent again)

    def record_after_commit() -> None:
        connection.topology_recording = None
        record.delay()

    connection.topology_recording = record_after_commit
    transaction.on_commit(record_after_commit, robust=True)  # a broker away must not fail the change (the minute run)


def connect() -> None:
    for model in WATCHED:
        post_save.connect(_inventory_changed, sender=model, dispatch_uid=f"topology-record-save-{model.__name__}")
        post_delete.connect(_inventory_changed, sender=model, dispatch_uid=f"topology-record-delete-{model.__name__}")
    m2m_changed.connect(_inventory_changed, sender=Nic.peer_gpus.through, dispatch_uid="topology-record-peers")
    m2m_changed.connect(
        _inventory_changed, sender=NvlinkPartition.nodes.through, dispatch_uid="topology-record-partition-trays"
    )
