"""`make run`'s demo: the simulated cluster comes with its BMCs' login, so power through the BMC, the event log and the
readings work on it without a command an operator would have to know."""

import io

import pytest
from django.test import override_settings

from apps.inventory.models import Node, NvlinkSwitchTray
from apps.monitoring.models import Bmc
from portal.management.commands.serve import Command


@pytest.mark.django_db
@override_settings(RACKPILOT_JOB_DEFAULT_TRANSPORT="sim")
def test_the_demo_loaded_by_serve_has_a_bmc_login_for_every_node_with_a_bmc_address():
    Command(stdout=io.StringIO()).load_demo()

    with_address = Node.objects.exclude(bmc_address="")
    assert with_address.count() > 50
    assert Bmc.objects.filter(node__isnull=False).count() == with_address.count()
    assert not with_address.filter(bmc__isnull=True).exists()
    switch_trays = NvlinkSwitchTray.objects.exclude(bmc_address="")  # their own BMCs, read over Redfish
    assert switch_trays.count() == 9
    assert Bmc.objects.filter(switch_tray__isnull=False).count() == switch_trays.count()


@pytest.mark.django_db
@override_settings(RACKPILOT_JOB_DEFAULT_TRANSPORT="ssh")
def test_a_demo_served_over_ssh_gets_no_simulated_bmc_login():
    Command(stdout=io.StringIO()).load_demo()

    assert Node.objects.exclude(bmc_address="").exists()
    assert not Bmc.objects.exists()
