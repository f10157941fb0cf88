"""Validation an operator expects from the inventory, whichever way the data comes in."""

import pytest
from django.core.exceptions import ValidationError

from apps.inventory.models import Cable, Nic, Node, SshHostKey
from tests import factories

pytestmark = pytest.mark.django_db


def test_two_nodes_cannot_share_a_rack_position():
    rack = factories.make_rack()
    factories.make_node(rack=rack, u_position=10, u_height=4)
    clash = Node(hostname="clash", rack=rack, u_position=10)
    with pytest.raises(ValidationError) as error:
        clash.full_clean()
    assert "u_position" in error.value.message_dict


def test_a_node_cannot_overlap_the_units_of_another():
    rack = factories.make_rack()
    factories.make_node(rack=rack, u_position=10, u_height=4, hostname="tall")
    overlapping = Node(hostname="overlap", rack=rack, u_position=12, u_height=2)
    with pytest.raises(ValidationError, match="overlaps tall at U10"):
        overlapping.full_clean()
    Node(hostname="above", rack=rack, u_position=14, u_height=2).full_clean()


def test_a_node_must_fit_in_its_rack():
    rack = factories.make_rack(u_height=42)
    with pytest.raises(ValidationError, match="does not fit"):
        Node(hostname="too-high", rack=rack, u_position=40, u_height=4).full_clean()


def test_a_position_needs_a_rack():
    with pytest.raises(ValidationError) as error:
        Node(hostname="floating", u_position=3).full_clean()
    assert error.value.message_dict["u_position"] == ["A rack position needs a rack."]


@pytest.mark.parametrize("mtu", [67, 9217, 0])
def test_mtu_outside_68_to_9216_is_refused(mtu):
    nic = Nic(node=factories.make_node(), name="ens1np0", speed_gbps=400, mtu=mtu)
    with pytest.raises(ValidationError) as error:
        nic.full_clean()
    assert "mtu" in error.value.message_dict


def test_pfc_priorities_are_0_to_7_without_repeats():
    node = factories.make_node()
    for bad in ([8], [3, 3], "3", [True]):
        nic = Nic(node=node, name="ens1np0", speed_gbps=400, pfc_priorities=bad)
        with pytest.raises(ValidationError) as error:
            nic.full_clean()
        assert "pfc_priorities" in error.value.message_dict
    Nic(node=node, name="ens1np0", speed_gbps=400, pfc_priorities=[3, 4]).full_clean()


def test_speed_must_be_positive():
    with pytest.raises(ValidationError) as error:
        Nic(node=factories.make_node(), name="eth0", speed_gbps=0).full_clean()
    assert "speed_gbps" in error.value.message_dict


def test_a_switch_port_carries_one_cable_whichever_end_it_is():
    leaf = factories.make_switch()
    first = factories.make_nic()
    Cable.objects.create(a_nic=first, b_switch=leaf, b_port="swp1", speed_gbps=400)
    second = factories.make_nic()
    as_b = Cable(a_nic=second, b_switch=leaf, b_port="swp1", speed_gbps=400)
    with pytest.raises(ValidationError):
        as_b.full_clean()
    as_a = Cable(a_switch=leaf, a_port="swp1", b_nic=second, speed_gbps=400)
    with pytest.raises(ValidationError, match="already has a cable"):
        as_a.full_clean()


def test_a_nic_carries_one_cable():
    nic = factories.make_nic()
    Cable.objects.create(a_nic=nic, b_switch=factories.make_switch(), b_port="swp1", speed_gbps=400)
    again = Cable(a_switch=factories.make_switch(), a_port="swp2", b_nic=nic, speed_gbps=400)
    with pytest.raises(ValidationError, match="already has a cable"):
        again.full_clean()


def test_a_cable_end_is_a_nic_or_a_switch_port():
    leaf = factories.make_switch()
    both = Cable(a_nic=factories.make_nic(), a_switch=leaf, a_port="swp3", b_switch=leaf, b_port="swp4", speed_gbps=1)
    with pytest.raises(ValidationError) as error:
        both.full_clean()
    assert "a_nic" in error.value.message_dict
    unnamed = Cable(a_nic=factories.make_nic(), b_switch=leaf, speed_gbps=400)
    with pytest.raises(ValidationError) as error:
        unnamed.full_clean()
    assert "b_port" in error.value.message_dict


def test_host_key_is_normalised_and_fingerprinted():
    key = SshHostKey(
        node=factories.make_node(),
        public_key="ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl  root@gpu001\n",
    )
    key.full_clean()
    assert key.public_key.count(" ") == 1
    assert key.fingerprint.startswith("SHA256:") and len(key.fingerprint) == 50
    with pytest.raises(ValidationError):
        SshHostKey(node=key.node, public_key="not a key").full_clean()
