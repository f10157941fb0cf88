"""SSH access profiles: one scope each, the most specific wins, strict validation naming the field, and a private
key that is stored encrypted and never shown back (API, admin, audit log)."""

import asyncssh
import pytest
from django.db import IntegrityError, transaction

from apps.core.models import AuditEntry
from apps.inventory.models import SshAccess
from tests import factories
from tests.inventory.factories import ed25519_key

pytestmark = pytest.mark.django_db

URL = "/api/ssh-access/"
BROKEN_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n-----END OPENSSH PRIVATE KEY-----\n"


def openssh_private_key(passphrase: str | None = None) -> str:
    """A fresh ed25519 key in OpenSSH's format, made in Python (a fresh machine may have no ssh-keygen)."""
    key = asyncssh.generate_private_key("ssh-ed25519")
    return key.export_private_key("openssh", passphrase=passphrase).decode()


@pytest.fixture(scope="module")
def private_key():
    return openssh_private_key()


def key_body(private_key: str) -> str:
    """A line from the middle of the key: what a leak would show even if the armour lines were stripped."""
    return private_key.splitlines()[2]


def test_the_most_specific_profile_wins():
    site = factories.make_site()
    rack = factories.make_rack(site=site)
    other_rack = factories.make_rack(site=site)
    in_rack, in_other_rack, alone = (
        factories.make_node(rack=rack),
        factories.make_node(rack=other_rack),
        factories.make_node(rack=rack),
    )
    unracked = factories.make_node()
    by_site = SshAccess.objects.create(site=site, user="ops")
    by_rack = SshAccess.objects.create(rack=rack, user="rackops")
    by_node = SshAccess.objects.create(node=alone, user="special")
    scopes = [(n.pk, n.rack_id, n.rack.site_id if n.rack else None) for n in (in_rack, in_other_rack, alone, unracked)]
    chosen = SshAccess.objects.for_nodes(scopes)
    assert chosen == {in_rack.pk: by_rack, in_other_rack.pk: by_site, alone.pk: by_node}


@pytest.mark.wirings  # each database words the refusal its way
def test_exactly_one_scope_is_enforced_by_a_named_constraint():
    site = factories.make_site()
    node = factories.make_node()
    with pytest.raises(IntegrityError, match="sshaccess_exactly_one_scope|CHECK constraint"), transaction.atomic():
        SshAccess.objects.create(site=site, node=node, user="ops")
    with pytest.raises(IntegrityError), transaction.atomic():
        SshAccess.objects.create(user="ops")
    assert not SshAccess.objects.exists()


def test_the_private_key_is_stored_encrypted_and_the_audit_log_never_holds_it(private_key):
    access = SshAccess(site=factories.make_site(), user="ops")
    access.set_private_key(private_key)
    access.save()
    stored = SshAccess.objects.values_list("private_key_encrypted", flat=True).get(pk=access.pk)
    assert stored and key_body(private_key) not in stored and "PRIVATE KEY" not in stored
    assert SshAccess.objects.get(pk=access.pk).private_key() == private_key
    entries = [str(entry.changes) for entry in AuditEntry.objects.filter(object_type="inventory.sshaccess")]
    assert entries and not any(key_body(private_key) in text or stored in text for text in entries)
    assert "'private_key_encrypted': [None, 'set #" in entries[0]


def test_an_admin_creates_a_profile_and_nobody_reads_the_key_back(api_as, admin, viewer, private_key):
    site = factories.make_site()
    jump_key = ed25519_key(7)
    body = {
        "site": site.slug,
        "user": "ops",
        "port": 2222,
        "private_key": private_key,
        "sudo": True,
        "jump_host": "bastion.example.org",
        "jump_port": 22,
        "jump_host_keys": f"{jump_key} bastion\n",
    }
    response = api_as(admin).post(URL, body, format="json")
    assert response.status_code == 201, response.json()
    created = response.json()
    assert "private_key" not in created and created["has_private_key"] is True
    assert created["scope"] == "site" and created["jump_host_keys"] == jump_key
    access = SshAccess.objects.get(public_id=created["id"])
    assert access.private_key() == private_key
    for user in (admin, viewer):
        for url in (URL, f"{URL}{created['id']}/"):
            text = api_as(user).get(url).content.decode()
            assert key_body(private_key) not in text and access.private_key_encrypted not in text
    # Leaving the key out keeps it; "" removes it.
    assert api_as(admin).patch(f"{URL}{created['id']}/", {"port": 22}, format="json").status_code == 200
    assert SshAccess.objects.get(pk=access.pk).private_key() == private_key
    response = api_as(admin).patch(f"{URL}{created['id']}/", {"private_key": ""}, format="json")
    assert response.status_code == 200 and response.json()["has_private_key"] is False
    assert SshAccess.objects.get(pk=access.pk).private_key_encrypted == ""


def test_viewers_and_operators_read_only_anonymous_callers_nothing(api_as, api_client, viewer, operator):
    SshAccess.objects.create(site=factories.make_site(), user="ops")
    assert api_client.get(URL).status_code in (401, 403)
    for user in (viewer, operator):
        assert api_as(user).get(URL).json()["count"] == 1
        body = {"site": factories.make_site().slug, "user": "ops"}
        assert api_as(user).post(URL, body, format="json").status_code == 403
    assert SshAccess.objects.count() == 1


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"user": "root; rm -rf /"}, "user"),
        ({"user": "ops\n"}, "user"),
        ({"user": "Ops"}, "user"),
        ({"port": 0}, "port"),
        ({"port": 65536}, "port"),
        ({"jump_host": "bastion.example.org\n", "jump_host_keys": "KEY"}, "jump_host"),
        ({"jump_host": "ops@bastion", "jump_host_keys": "KEY"}, "jump_host"),
        ({"jump_host": "-oProxyCommand=x", "jump_host_keys": "KEY"}, "jump_host"),
        ({"jump_host": "bastion", "jump_host_keys": "KEY", "jump_port": 70000}, "jump_port"),
        ({"jump_host": "bastion", "jump_host_keys": "KEY", "jump_user": "x y"}, "jump_user"),
        ({"jump_host": "bastion"}, "jump_host_keys"),
        ({"jump_host": "bastion", "jump_host_keys": "ssh-ed25519 not*base64"}, "jump_host_keys"),
        ({"jump_user": "ops"}, "jump_host"),
        ({"private_key": BROKEN_KEY}, "private_key"),
    ],
)
def test_bad_input_is_a_400_naming_the_field_and_nothing_is_stored(api_as, admin, change, field):
    body = {"site": factories.make_site().slug, "user": "ops", **change}
    if body.get("jump_host_keys") == "KEY":
        body["jump_host_keys"] = ed25519_key(3)
    response = api_as(admin).post(URL, body, format="json")
    assert response.status_code == 400, response.json()
    assert field in response.json(), response.json()
    assert not SshAccess.objects.exists()


def test_a_passphrase_protected_key_is_refused_without_quoting_it(api_as, admin, tmp_path):
    text = openssh_private_key(passphrase="sesame")
    body = {"site": factories.make_site().slug, "user": "ops", "private_key": text}
    response = api_as(admin).post(URL, body, format="json")
    assert response.status_code == 400 and "passphrase" in str(response.json()["private_key"])
    assert key_body(text) not in response.content.decode()


def test_two_scopes_or_a_second_profile_for_the_same_scope_are_refused(api_as, admin):
    site = factories.make_site()
    node = factories.make_node()
    response = api_as(admin).post(URL, {"site": site.slug, "node": node.hostname, "user": "ops"}, format="json")
    assert response.status_code == 400 and "exactly one" in str(response.json())
    assert api_as(admin).post(URL, {"node": node.hostname, "user": "ops"}, format="json").status_code == 201
    response = api_as(admin).post(URL, {"node": node.hostname, "user": "other"}, format="json")
    assert response.status_code == 400 and "already has" in str(response.json())
    assert SshAccess.objects.count() == 1


def test_the_admin_shows_set_or_not_set_and_never_the_key(client, django_user_model, private_key):
    superuser = django_user_model.objects.create_superuser("boss", "boss@example.org", "pw-123456789")
    client.force_login(superuser)
    access = SshAccess(site=factories.make_site(), user="ops")
    access.set_private_key(private_key)
    access.save()
    listing = client.get("/admin/inventory/sshaccess/").content.decode()
    assert "set" in listing and key_body(private_key) not in listing
    page = client.get(f"/admin/inventory/sshaccess/{access.pk}/change/").content.decode()
    assert key_body(private_key) not in page and access.private_key_encrypted not in page
