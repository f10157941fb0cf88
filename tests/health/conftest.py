import pytest

from apps.inventory.models import Node
from apps.simulator import services as simulator


@pytest.fixture
def inject(demo_cluster):
    """inject(hostname, kind, target, **parameters) -> the simulated fault."""

    def call(hostname, kind, target="", **parameters):
        return simulator.inject_fault(
            node=Node.objects.get(hostname=hostname), kind=kind, target=target, parameters=parameters
        )

    return call
