"""Fixtures for the simulator tests: a node of the demo cluster and a shortcut to run commands on it."""

from pathlib import Path

import pytest

from apps.inventory.models import Node
from apps.simulator import services

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"


@pytest.fixture
def gpu_node(demo_cluster):
    return Node.objects.get(hostname="gpu001")


@pytest.fixture
def run(gpu_node):
    """run(*argv, node=gpu001, seed=0, load=0.0) -> CommandOutput."""

    def call(*argv, node=None, seed=0, load=0.0):
        return services.run_command(node=node or gpu_node, argv=list(argv), seed=seed, load=load)

    return call


def real(path: str) -> str:
    return (REAL / path).read_text()
