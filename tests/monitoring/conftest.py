"""Fixtures for the monitoring tests: BMC settings on demo nodes, and a poll run in this process."""

import pytest
from django.conf import settings

from apps.inventory.models import Node
from apps.jobs.services import TargetSpec, create_job
from apps.monitoring import services


@pytest.fixture
def gpu_node(demo_cluster):
    return Node.objects.get(hostname="gpu001")


@pytest.fixture
def sim_bmc(gpu_node):
    """gpu001's BMC set up with the simulated BMCs' account."""

    def make(node=None, *, protocol="ipmi", password=None, user=None):
        node = node or gpu_node
        return services.save_bmc(
            node=node,
            address=node.bmc_address,
            protocol=protocol,
            port=None,
            user=user or settings.RACKPILOT_SIM_BMC_USER,
            verify_tls=True,
            password=settings.RACKPILOT_SIM_BMC_PASSWORD if password is None else password,
        )

    return make


@pytest.fixture
def poll(run_shards):
    """poll(*nodes, transport="sim") -> the finished bmc-poll job."""

    def run(*nodes, transport="sim"):
        job = create_job(
            kind="bmc-poll", targets=TargetSpec(nodes=tuple(node.hostname for node in nodes)), transport=transport
        )
        return run_shards(job)

    return run
