"""A GPU's presence is the inventory's to say (discovery, the API, an import); its health is derived here from that
presence and its open events. The inventory may not import health, so the health app listens for the GPU's save."""

from django.db.models.signals import pre_save

from apps.health.services import gpu_presence_changed
from apps.inventory.models import Gpu


def _gpu_saving(sender, instance: Gpu, raw: bool = False, **kwargs) -> None:
    if raw:
        return  # a fixture loads rows as they were
    before = getattr(instance, "_audit_loaded", {}).get("presence")
    if instance.pk is None or before != instance.presence:
        gpu_presence_changed(gpu=instance)


def connect() -> None:
    pre_save.connect(_gpu_saving, sender=Gpu, dispatch_uid="health-gpu-presence")
