"""Names are checked whole: a trailing newline is not a valid end of a host name, an interface, a slug... (`$`
matches before a final `\\n`; the patterns use `\\Z`)."""

import json
import re

import pytest
from django.core.exceptions import ValidationError

from apps.core.validators import name_validator
from apps.deployments.artefacts import base as artefacts
from apps.discovery.facts import VERSION
from apps.inventory.models import Node
from apps.inventory.models.fabric import port_name_validator
from apps.inventory.models.nodes import (
    hostname_validator,
    interface_name_validator,
    mac_validator,
    pci_address_validator,
    version_validator,
)
from apps.inventory.models.sites import slug_validator
from apps.inventory.models.storage import mount_point_validator
from apps.inventory.transfer import ImportRejected, import_inventory
from tests import factories

VALIDATORS = [
    (hostname_validator, "imp-g1"),
    (interface_name_validator, "ens1f0"),
    (pci_address_validator, "0000:18:00.0"),
    (mac_validator, "0c:42:a1:00:00:01"),
    (version_validator, "535.161.08"),
    (slug_validator, "dc1"),
    (mount_point_validator, "/data/hot"),
    (port_name_validator, "swp12"),
]
PATTERNS = [
    (VERSION, "535.161.08"),
    (artefacts.IFNAME_RE, "ens1f0"),
    (artefacts.ENV_NAME_RE, "NCCL_DEBUG"),
    (artefacts.VERSION_RE, "12.4"),
    (artefacts.DNS_LABEL_RE, "gpu"),
    (artefacts.DNS_SUBDOMAIN_RE, "gpu.example"),
    (artefacts.LABEL_NAME_RE, "rack"),
    (artefacts.LABEL_VALUE_RE, "r01"),
    (artefacts.SLICE_RE, "training.slice"),
    (artefacts.TOKEN_RE, "hot"),
]


@pytest.mark.parametrize(("validator", "good"), VALIDATORS, ids=lambda v: getattr(v, "message", v)[:20])
def test_model_validators_refuse_a_trailing_newline(validator, good):
    validator(good)
    with pytest.raises(ValidationError):
        validator(good + "\n")


@pytest.mark.parametrize(("pattern", "good"), PATTERNS, ids=lambda v: getattr(v, "pattern", v)[:20])
def test_name_patterns_refuse_a_trailing_newline(pattern, good):
    assert pattern.match(good)
    assert not pattern.match(good + "\n")


def test_no_name_pattern_in_the_tree_ends_with_a_dollar():
    """Every pattern the tree checks names with ends in \\Z (or is used with fullmatch); `$` lets `name\\n` pass."""
    for validator, _ in VALIDATORS:
        assert validator.regex.pattern.endswith(r"\Z"), validator.regex.pattern
    for pattern, _ in PATTERNS:
        assert not re.search(r"(?<!\\)\$", pattern.pattern), pattern.pattern


@pytest.mark.django_db
@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_an_import_refuses_a_host_name_with_a_trailing_newline(fmt):
    document = {"version": 1, "nodes": [{"hostname": "imp-g1\n"}]}
    text = json.dumps(document) if fmt == "json" else 'version: 1\nnodes:\n- hostname: "imp-g1\\n"\n'
    with pytest.raises(ImportRejected) as rejected:
        import_inventory(text=text, fmt=fmt)
    assert [(p.field, p.line) for p in rejected.value.problems] == [("hostname", 1 if fmt == "json" else 3)]
    assert not Node.objects.exists()


@pytest.mark.django_db
def test_the_api_never_stores_a_host_name_with_a_trailing_newline(api_as, admin):
    factories.h200()
    response = api_as(admin).post("/api/nodes/", {"hostname": "imp-g1\n"}, format="json")
    assert response.status_code in (201, 400)
    assert not Node.objects.filter(hostname__endswith="\n").exists()


@pytest.mark.django_db
def test_the_api_refuses_an_interface_name_with_a_trailing_newline(api_as, admin):
    node = factories.make_node()
    body = {"node": str(node.public_id), "name": "ens1f0\n", "purpose": "data"}
    response = api_as(admin).post("/api/nics/", body, format="json")
    assert response.status_code in (201, 400)
    assert not node.nics.filter(name__endswith="\n").exists()


@pytest.mark.django_db
def test_the_edit_form_never_stores_a_host_name_with_a_trailing_newline(browser_as, admin, demo_cluster):
    from tests.inventory.test_pages import _form_data

    node = Node.objects.get(hostname="gpu002")
    response = browser_as(admin).post(f"/nodes/{node.public_id}/edit/", _form_data(node, hostname="imp-g1\n"))
    assert response.status_code in (200, 302)
    node.refresh_from_db()
    assert not node.hostname.endswith("\n")


NAMED = [
    ("switches", "version: 1\nswitches:\n- {name: \"leaf-x\\n\", site: demo-dc, plane: a, tier: leaf, port_count: 32, "
     "port_speed_gbps: 400}\n"),
    ("racks", 'version: 1\nracks:\n- {site: demo-dc, name: "r99\\n"}\n'),
    ("storage_tiers", 'version: 1\nstorage_tiers:\n- {site: demo-dc, name: "hot\\t", kind: hot, medium: NVMe, '
     "bandwidth_gb_per_s: 20, capacity_tb: 1}\n"),
    ("gpu_skus", 'version: 1\ngpu_skus:\n- {name: " B200", architecture: Blackwell, hbm_gib: 180}\n'),
]  # fmt: skip


@pytest.mark.django_db
@pytest.mark.parametrize(("section", "text"), NAMED, ids=[section for section, _ in NAMED])
def test_names_that_other_rows_refer_to_refuse_control_characters_and_edge_spaces(section, text, demo_cluster):
    def name_problems(text: str) -> list:
        try:
            import_inventory(text=text, fmt="yaml", dry_run=True)
        except ImportRejected as rejected:
            return [(p.section, p.field, p.line) for p in rejected.problems if p.field == "name"]
        return []

    assert name_problems(text) == [(section, "name", 3)]
    clean = text.replace("\\n", "").replace("\\t", "").replace('" B200', '"B200')
    assert clean != text and name_problems(clean) == []


def test_the_name_validator_takes_ordinary_names():
    for name in ["leaf-r01-a", "H200 SXM", "r01", "Row A / 3"]:
        name_validator(name)
    for name in ["r01\n", " r01", "r01 ", "r\x0001", "", "a\u2028b"]:
        with pytest.raises(ValidationError):
            name_validator(name)
