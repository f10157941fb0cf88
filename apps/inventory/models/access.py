"""How Rackpilot logs in to nodes over SSH: per site, rack or node, instead of one login for the whole fleet."""

import hashlib
import re

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

from apps.core import secrets
from apps.core.audit import AuditedModel
from apps.core.models import PublicModel
from apps.core.validators import host_validator
from apps.inventory.hostkeys import fingerprint_of
from apps.inventory.models.nodes import Node
from apps.inventory.models.sites import Rack, Site

# A POSIX login name as useradd accepts it by default (no trailing $: machine accounts are no SSH logins).
_USER = re.compile(r"[a-z_][a-z0-9_.-]{0,31}\Z")
_OPENSSH_PUBLIC_KEY = re.compile(r"(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(256|384|521)) [A-Za-z0-9+/]+=*\Z")
PORT_VALIDATORS = [MinValueValidator(1), MaxValueValidator(65535)]


def validate_login_user(value: str) -> None:
    if not _USER.match(value):
        raise ValidationError(
            "Enter a login name: a lower-case letter or _, then up to 31 lower-case letters, digits, _ . or -."
        )


def validate_host(value: str) -> None:
    """A DNS host name or an IP address, nothing else (no user@, no port, no spaces or shell characters)."""
    host_validator(value)


def parse_public_keys(text: str) -> list[str]:
    """OpenSSH public key lines ('<type> <base64> [comment]'), one per line; raises ValidationError naming the line."""
    keys = []
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line:
            continue
        key = " ".join(line.split()[:2])
        if not _OPENSSH_PUBLIC_KEY.match(key):
            raise ValidationError(f"Line {number} is not an OpenSSH public key such as 'ssh-ed25519 AAAA…'.")
        try:
            fingerprint_of(key)
        except ValueError:
            raise ValidationError(f"Line {number} is not an OpenSSH public key (its base64 does not decode).") from None
        keys.append(key)
    return keys


def check_private_key(text: str) -> str:
    """An unencrypted OpenSSH or PEM private key, normalised; raises ValidationError (which never quotes it)."""
    data = text.strip().encode() + b"\n"
    loaders = (serialization.load_ssh_private_key, serialization.load_pem_private_key)
    for load in loaders:
        try:
            load(data, password=None)
        except TypeError:
            raise ValidationError(
                "This private key is protected by a passphrase: give an unencrypted key (it is stored encrypted)."
            ) from None
        except (ValueError, UnsupportedAlgorithm):
            continue
        return data.decode()
    raise ValidationError("Enter an OpenSSH or PEM private key ('-----BEGIN OPENSSH PRIVATE KEY-----' …).")


class SshAccessQuerySet(models.QuerySet):
    def for_nodes(self, scopes: list[tuple[int, int | None, int | None]]) -> dict[int, "SshAccess"]:
        """The profile that applies to each node, given (node_id, rack_id, site_id): node > rack > site."""
        node_ids = {node for node, _, _ in scopes}
        rack_ids = {rack for _, rack, _ in scopes if rack is not None}
        site_ids = {site for _, _, site in scopes if site is not None}
        by_scope: dict[tuple[str, int], SshAccess] = {}
        for access in self.filter(Q(node_id__in=node_ids) | Q(rack_id__in=rack_ids) | Q(site_id__in=site_ids)):
            by_scope[access.scope, access.scope_id] = access
        chosen = {}
        for node, rack, site in scopes:
            for key in (("node", node), ("rack", rack), ("site", site)):
                if key[1] is not None and key in by_scope:
                    chosen[node] = by_scope[key]
                    break
        return chosen


class SshAccess(AuditedModel, PublicModel):
    """The SSH login for the nodes of one site, one rack or one node: user, port, private key, jump host, sudo.

    The most specific one wins (node > rack > site); nodes with none use RACKPILOT_SSH_USER / RACKPILOT_SSH_KEY.
    The private key is stored encrypted (apps/core/secrets.py) and never shown back.
    """

    site = models.ForeignKey(Site, null=True, blank=True, on_delete=models.CASCADE, related_name="ssh_access")
    rack = models.ForeignKey(Rack, null=True, blank=True, on_delete=models.CASCADE, related_name="ssh_access")
    node = models.ForeignKey(Node, null=True, blank=True, on_delete=models.CASCADE, related_name="ssh_access")
    user = models.CharField(max_length=32, validators=[validate_login_user], help_text="The login name on the nodes.")
    port = models.PositiveIntegerField(
        null=True, blank=True, validators=PORT_VALIDATORS, help_text="Empty: each node's own SSH port."
    )
    private_key_encrypted = models.TextField(blank=True, editable=False)
    sudo = models.BooleanField(
        default=False, help_text="The login is not root: run the commands that need root as `sudo -n`."
    )
    jump_host = models.CharField(
        max_length=253, blank=True, validators=[validate_host], help_text="Reach the nodes through this host."
    )
    jump_port = models.PositiveIntegerField(default=22, validators=PORT_VALIDATORS)
    jump_user = models.CharField(
        max_length=32, blank=True, validators=[validate_login_user], help_text="Empty: the same login as the nodes."
    )
    jump_host_keys = models.TextField(
        blank=True, help_text="The jump host's trusted host key(s), one OpenSSH public key per line."
    )

    objects = SshAccessQuerySet.as_manager()

    class Meta:
        ordering = ["site__name", "rack__name", "node__hostname", "pk"]
        verbose_name = "SSH access"
        verbose_name_plural = "SSH access profiles"
        constraints = [
            models.CheckConstraint(
                condition=(
                    Q(site__isnull=False, rack__isnull=True, node__isnull=True)
                    | Q(site__isnull=True, rack__isnull=False, node__isnull=True)
                    | Q(site__isnull=True, rack__isnull=True, node__isnull=False)
                ),
                name="sshaccess_exactly_one_scope",
                violation_error_message="Give exactly one of site, rack or node.",
            ),
            models.UniqueConstraint(
                fields=["site"],
                condition=Q(site__isnull=False),
                name="sshaccess_one_per_site",
                violation_error_message="This site already has an SSH access profile: change that one.",
            ),
            models.UniqueConstraint(
                fields=["rack"],
                condition=Q(rack__isnull=False),
                name="sshaccess_one_per_rack",
                violation_error_message="This rack already has an SSH access profile: change that one.",
            ),
            models.UniqueConstraint(
                fields=["node"],
                condition=Q(node__isnull=False),
                name="sshaccess_one_per_node",
                violation_error_message="This node already has an SSH access profile: change that one.",
            ),
            models.CheckConstraint(
                condition=Q(port__isnull=True) | Q(port__gte=1, port__lte=65535), name="sshaccess_port_range"
            ),
            models.CheckConstraint(
                condition=Q(jump_port__gte=1, jump_port__lte=65535), name="sshaccess_jump_port_range"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} on {self.scope} {self.scope_object}"

    @property
    def scope(self) -> str:
        return "node" if self.node_id else "rack" if self.rack_id else "site"

    @property
    def scope_id(self) -> int | None:
        return self.node_id or self.rack_id or self.site_id

    @property
    def scope_object(self):
        return self.node if self.node_id else self.rack if self.rack_id else self.site

    @property
    def has_private_key(self) -> bool:
        return bool(self.private_key_encrypted)

    def set_private_key(self, plaintext: str) -> None:
        self.private_key_encrypted = secrets.encrypt(plaintext) if plaintext else ""

    def private_key(self) -> str:
        return secrets.decrypt(self.private_key_encrypted) if self.private_key_encrypted else ""

    def jump_keys(self) -> list[str]:
        return parse_public_keys(self.jump_host_keys)

    def clean(self) -> None:
        super().clean()
        errors = {}
        if self.jump_host:
            try:
                keys = parse_public_keys(self.jump_host_keys)
            except ValidationError as error:
                errors["jump_host_keys"] = error.messages
            else:
                if not keys:
                    errors["jump_host_keys"] = ["A jump host needs its trusted host key: its key is always verified."]
                self.jump_host_keys = "\n".join(keys)
        elif self.jump_user or self.jump_host_keys.strip():
            errors["jump_host"] = ["Give the jump host these settings belong to, or leave them empty."]
        if errors:
            raise ValidationError(errors)

    @classmethod
    def from_db(cls, db, field_names, values):
        instance = super().from_db(db, field_names, values)
        loaded = getattr(instance, "_audit_loaded", None)
        if loaded is not None and "private_key_encrypted" in loaded:
            loaded["private_key_encrypted"] = _audit_marker(loaded["private_key_encrypted"])
        return instance

    def audit_values(self) -> dict:
        # The audit log says that the key was set or changed; it never holds the key, nor even its ciphertext.
        values = super().audit_values()
        values["private_key_encrypted"] = _audit_marker(values["private_key_encrypted"])
        return values


def _audit_marker(token: str) -> str:
    return f"set #{hashlib.sha256(token.encode()).hexdigest()[:8]}" if token else "not set"
