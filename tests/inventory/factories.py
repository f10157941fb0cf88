"""Factories for the inventory objects tests/factories.py does not cover."""

import base64
import itertools
from decimal import Decimal

from apps.inventory.choices import CableMedium, FirmwareComponent, Plane, StorageTierKind
from apps.inventory.models import Cable, Firmware, SshHostKey, StorageTier, Tag, Volume
from tests import factories

_counter = itertools.count(1)


def ed25519_key(seed: int = 1) -> str:
    """A well-formed OpenSSH ed25519 public key line (not a real key pair; nothing here signs)."""

    def string(data: bytes) -> bytes:
        return len(data).to_bytes(4, "big") + data

    blob = string(b"ssh-ed25519") + string(bytes([seed % 256]) * 32)
    return "ssh-ed25519 " + base64.b64encode(blob).decode()


def make_tag(**fields) -> Tag:
    n = next(_counter)
    return Tag.objects.create(**{"name": f"Pool {n}", "slug": f"pool-{n}", **fields})


def make_tier(**fields) -> StorageTier:
    n = next(_counter)
    fields.setdefault("site", factories.make_site())
    return StorageTier.objects.create(
        **{
            "name": f"Tier {n}",
            "kind": StorageTierKind.HOT,
            "medium": "NVMe RAID",
            "bandwidth_gb_per_s": Decimal("24"),
            "capacity_tb": Decimal("2"),
            **fields,
        }
    )


def make_volume(**fields) -> Volume:
    fields.setdefault("node", factories.make_node())
    fields.setdefault("tier", make_tier())
    return Volume.objects.create(**{"mount_point": f"/data/{next(_counter)}", "capacity_gb": 2000, **fields})


def make_firmware(**fields) -> Firmware:
    fields.setdefault("node", factories.make_node())
    return Firmware.objects.create(**{"component": FirmwareComponent.BIOS, "version": "2.4.1", **fields})


def make_cable(**fields) -> Cable:
    if "a_switch" not in fields:
        fields.setdefault("a_nic", factories.make_nic())
    if "b_nic" not in fields:
        fields.setdefault("b_switch", factories.make_switch())
        fields.setdefault("b_port", f"swp{next(_counter)}")
    return Cable.objects.create(**{"speed_gbps": 400, "medium": CableMedium.AOC, "plane": Plane.A, **fields})


def make_host_key(**fields) -> SshHostKey:
    from apps.inventory.hostkeys import fingerprint_of

    fields.setdefault("node", factories.make_node())
    key = fields.pop("public_key", ed25519_key(next(_counter)))
    return SshHostKey.objects.create(public_key=key, fingerprint=fingerprint_of(key), **fields)
