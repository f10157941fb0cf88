"""The inventory's viewsets, registered on the one API router in portal/urls.py."""

from apps.inventory.api import access, transfer_views, views

ROUTES: list = [
    ("sites", views.SiteViewSet),
    ("racks", views.RackViewSet),
    ("tags", views.TagViewSet),
    ("gpu-skus", views.GpuSkuViewSet),
    ("nodes", views.NodeViewSet),
    ("gpus", views.GpuViewSet),
    ("nics", views.NicViewSet),
    ("switches", views.SwitchViewSet),
    ("pdus", views.PduViewSet),
    ("cables", views.CableViewSet),
    ("storage-tiers", views.StorageTierViewSet),
    ("volumes", views.VolumeViewSet),
    ("firmware", views.FirmwareViewSet),
    ("host-keys", views.SshHostKeyViewSet),
    ("inventory", transfer_views.InventoryTransferViewSet, "inventory"),  # export/ and import/
    ("ssh-access", access.SshAccessViewSet),
]
