"""The simulated hardware follows the inventory's record of a swap: a GPU whose serial changes is a new card, so the
faults injected on the old card (on that GPU's index) leave with it. A fault on the whole node stays."""

from django.db.models.signals import pre_save

from apps.inventory.models import Gpu
from apps.simulator.faults.kinds import FAULT_KINDS
from apps.simulator.faults.targets import GPU, GPU_OR_NODE
from apps.simulator.models import SimFault

ON_A_CARD = tuple(kind for kind, spec in FAULT_KINDS.items() if spec.target in (GPU, GPU_OR_NODE))


def card_replaced(sender, instance: Gpu, raw: bool = False, **kwargs) -> None:
    if raw or instance.pk is None or not instance.serial:
        return
    before = Gpu.objects.filter(pk=instance.pk).values_list("serial", flat=True).first()
    if before is None or before == instance.serial:
        return
    for fault in SimFault.objects.filter(node_id=instance.node_id, kind__in=ON_A_CARD, target=str(instance.index)):
        fault.delete()  # one by one, so each removal is audited as a fault cleared


def connect() -> None:
    pre_save.connect(card_replaced, sender=Gpu, dispatch_uid="simulator.card_replaced")
