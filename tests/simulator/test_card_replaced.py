"""A GPU swapped (its serial changed in the inventory, as a repair's part record writes it) is a new card in the
simulator: the faults of the old card leave with it, the node's other faults stay."""

import pytest

from apps.inventory.models import Node
from apps.simulator import services
from apps.simulator.choices import FaultKind
from apps.simulator.models import SimFault


@pytest.fixture
def node(demo_cluster):
    return Node.objects.get(hostname="gpu003")


def test_a_new_serial_on_the_gpu_takes_its_card_faults_away(node):
    services.inject_fault(node=node, kind=FaultKind.XID79, target="3")
    services.inject_fault(node=node, kind=FaultKind.XID79, target="5")
    assert _gpus_listed(node) == 6

    gpu = node.gpus.get(index=3)
    gpu.serial = "1652924019999"
    gpu.save(update_fields=["serial", "updated"])

    assert list(SimFault.objects.filter(node=node).values_list("target", flat=True)) == ["5"]
    assert _gpus_listed(node) == 7  # the new card answers; GPU 5 is still off the bus


def test_a_gpu_saved_with_its_serial_unchanged_keeps_its_faults(node):
    services.inject_fault(node=node, kind=FaultKind.XID79, target="3")
    gpu = node.gpus.get(index=3)
    gpu.numa_node = 1
    gpu.save()

    assert SimFault.objects.filter(node=node, target="3").exists()


def _gpus_listed(node) -> int:
    return services.run_command(node=node, argv=["nvidia-smi", "-L"]).stdout.count("GPU-")
