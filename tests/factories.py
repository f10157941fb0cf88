"""Small factories for tests: each makes a valid object with sensible defaults; pass what the test cares about."""

import itertools
from datetime import timedelta
from decimal import Decimal

from django.conf import settings
from django.utils import timezone

from apps.accounts.models import User
from apps.inventory.catalogue import sync_gpu_skus
from apps.inventory.choices import NicPurpose, NicTransport, NodeRole, Plane, SwitchTier
from apps.inventory.models import Gpu, GpuSku, Nic, Node, NvlinkSwitchTray, Pdu, Rack, Site, Switch
from apps.monitoring.bmc import logins
from apps.tokens import services as tokens

_counter = itertools.count(1)


def _next() -> int:
    return next(_counter)


def make_user(*, role: str, username: str | None = None, password: str = "correct-horse-battery") -> User:
    user = User.objects.create_user(username=username or f"user{_next()}", password=password, role=role)
    return user


def make_token(user: User, *, name: str = "automation", days: int = 30) -> str:
    """A new API token for the user; returns its secret, as the API tokens page shows it once."""
    return tokens.create_token(user=user, name=name, expires=timezone.now() + timedelta(days=days))[1]


def make_site(**fields) -> Site:
    n = _next()
    return Site.objects.create(**{"name": f"Site {n}", "slug": f"site-{n}", **fields})


def make_rack(**fields) -> Rack:
    n = _next()
    if "site" not in fields:
        fields["site"] = make_site()
    return Rack.objects.create(**{"name": f"rack{n}", "u_height": 48, "power_budget_kw": Decimal("60"), **fields})


def h200() -> GpuSku:
    # The shipped SKUs come with the migrations, but a transactional test elsewhere on this worker flushes them.
    sync_gpu_skus(GpuSku)
    return GpuSku.objects.get(name="H200 SXM")


def make_node(**fields) -> Node:
    n = _next()
    fields.setdefault("role", NodeRole.COMPUTE)
    return Node.objects.create(**{"hostname": f"node{n:04d}", **fields})


def make_sim_bmc(owner, *, protocol: str = "redfish", user: str | None = None, password: str | None = None):
    """The BMC settings of a node or an NVLink switch tray, as the simulated BMCs' account reaches them (a user or
    password given: that one)."""
    which = "switch_tray" if isinstance(owner, NvlinkSwitchTray) else "node"
    return logins.save_bmc(
        **{which: owner},
        address=owner.bmc_address,
        protocol=protocol,
        port=None,
        user=user or settings.RACKPILOT_SIM_BMC_USER,
        verify_tls=True,
        password=settings.RACKPILOT_SIM_BMC_PASSWORD if password is None else password,
    )


def make_gpu(**fields) -> Gpu:
    if "node" not in fields:
        fields["node"] = make_node()
    if "sku" not in fields:
        fields["sku"] = h200()
    return Gpu.objects.create(**{"index": 0, **fields})


def make_nic(**fields) -> Nic:
    if "node" not in fields:
        fields["node"] = make_node()
    return Nic.objects.create(
        **{
            "name": f"ens{_next()}np0",
            "purpose": NicPurpose.DATA,
            "speed_gbps": 400,
            "mtu": 9000,
            "rdma_capable": True,
            "transport": NicTransport.ROCE,
            "plane": Plane.A,
            **fields,
        }
    )


def make_switch(**fields) -> Switch:
    n = _next()
    if "site" not in fields:
        fields["site"] = make_site()
    return Switch.objects.create(
        **{
            "name": f"leaf{n}",
            "plane": Plane.A,
            "tier": SwitchTier.LEAF,
            "port_count": 64,
            "port_speed_gbps": 400,
            **fields,
        }
    )


def make_pdu(**fields) -> Pdu:
    """A vertical (0U) PDU on feed A at the rear left, unless told otherwise."""
    n = _next()
    if "rack" not in fields:
        fields["rack"] = make_rack()
    defaults = {"name": f"pdu{n}", "feed": "A", "max_power_w": 22000, "outlet_count": 24}
    if fields.get("position") is None:
        defaults["side"] = "left"
    return Pdu.objects.create(**{**defaults, **fields})


def make_serving_fleet():
    """Three compute nodes, the service `chat` on two of them, made two hours ago (what the power-limit policy
    judges needs an hour of the service's telemetry)."""
    from apps.inventory.demo import ClusterShape, load_cluster
    from apps.workloads.models import InferenceService

    load_cluster(ClusterShape(compute_nodes=3, nodes_per_rack=3, management_nodes=0))
    service = InferenceService.objects.create(name="chat", model="m", design_tokens_per_second=5000)
    service.nodes.set(Node.objects.filter(hostname__in=("gpu001", "gpu002")))
    two_hours_ago = timezone.now() - timedelta(hours=2)
    InferenceService.objects.update(created=two_hours_ago)
    Node.objects.update(created=two_hours_ago - timedelta(hours=1))
    return service
