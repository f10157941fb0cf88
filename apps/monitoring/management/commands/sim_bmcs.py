"""Give every node and NVLink switch tray with a BMC address the simulated BMCs' account, so the demo cluster's BMCs
are read. A rack-scale system's compute and switch trays are read over Redfish whatever the protocol asked: their
coolant and leak detectors are there."""

from django.conf import settings
from django.core.management.base import BaseCommand

from apps.core.audit import audit_context
from apps.core.choices import ChangeSource
from apps.inventory.models import Node, NvlinkSwitchTray
from apps.monitoring.bmc import logins
from apps.monitoring.choices import BmcProtocol
from apps.monitoring.models import Bmc


class Command(BaseCommand):
    help = (
        "BMC settings for the simulated cluster: every node and NVLink switch tray with a BMC address, read over IPMI "
        "or Redfish."
    )

    def add_arguments(self, parser):
        parser.add_argument("--protocol", choices=BmcProtocol.values, default=BmcProtocol.IPMI)

    def handle(self, *args, protocol: str, **options):
        nodes = Node.objects.exclude(bmc_address="").filter(bmc__isnull=True)
        trays = NvlinkSwitchTray.objects.exclude(bmc_address="").filter(bmc__isnull=True)
        owners = [("node", node, node.nvlink_domain_id is not None) for node in nodes]
        owners += [("switch_tray", tray, True) for tray in trays]
        with audit_context(source=ChangeSource.COMMAND):
            for field, owner, rack_scale in owners:
                logins.save_bmc(
                    **{field: owner},
                    address=owner.bmc_address,
                    protocol=BmcProtocol.REDFISH if rack_scale else protocol,
                    port=None,
                    user=settings.RACKPILOT_SIM_BMC_USER,
                    verify_tls=True,
                    password=settings.RACKPILOT_SIM_BMC_PASSWORD,
                )
        made = len(owners)
        self.stdout.write(f"{made} BMCs set up ({Bmc.objects.count()} in all); beat reads them per site.")
