"""Import and export of the whole inventory: round trips, all-or-nothing rejection with every problem located,
the management commands and the API."""

import json

import pytest
import yaml
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import include, path
from rest_framework.routers import SimpleRouter

from apps.core.models import AuditEntry
from apps.inventory.api.transfer_views import InventoryTransferViewSet
from apps.inventory.choices import HostKeyState, NodeStatus
from apps.inventory.models import (
    Cable,
    Firmware,
    Gpu,
    GpuSku,
    Nic,
    Node,
    Pdu,
    Rack,
    Site,
    SshHostKey,
    StorageTier,
    Switch,
    Tag,
    Volume,
)
from apps.inventory.transfer import (
    NODE_CSV_COLUMNS,
    ImportRejected,
    export_inventory,
    export_nodes_csv,
    import_inventory,
)
from tests import factories
from tests.inventory.factories import make_host_key

pytestmark = pytest.mark.django_db

HEADER = ",".join(NODE_CSV_COLUMNS)


@pytest.fixture
def inventory(demo_cluster, admin):
    """The demo cluster with an approved host key and a comment, so every section of the document has rows."""
    node = Node.objects.get(hostname="gpu001")
    make_host_key(node=node, state=HostKeyState.TRUSTED, approved_by=admin)
    Node.objects.filter(pk=node.pk).update(comments="Replaced riser card in May.")
    return demo_cluster


def delete_inventory() -> None:
    """Empties the inventory's tables. Straight SQL: the ORM would load and audit every row, slowly and beside the
    point here."""
    tables = [
        Node.tags.through,
        Nic.peer_gpus.through,
        Cable,
        Volume,
        Firmware,
        SshHostKey,
        Nic,
        Gpu,
        Node,
        Switch,
        Pdu,
    ]
    tables += [StorageTier, Rack, Site, Tag, GpuSku]
    with connection.cursor() as cursor:
        for model in tables:
            cursor.execute(f"DELETE FROM {connection.ops.quote_name(model._meta.db_table)}")


def rejected(**kwargs) -> list[tuple]:
    with pytest.raises(ImportRejected) as caught:
        import_inventory(**kwargs)
    return [(p.section, p.line, p.field) for p in caught.value.problems]


def csv_text(*rows: str) -> str:
    return "\n".join([HEADER, *rows]) + "\n"


# --- Round trips ----------------------------------------------------------------------------------------------------


def test_round_trip_through_an_empty_database(inventory, admin):
    as_json, as_yaml = export_inventory(fmt="json"), export_inventory(fmt="yaml")
    delete_inventory()
    assert not Node.objects.exists() and not GpuSku.objects.exists()

    result = import_inventory(text=as_yaml, fmt="yaml", user=admin)

    assert export_inventory(fmt="yaml") == as_yaml
    assert export_inventory(fmt="json") == as_json
    document = json.loads(as_json)
    assert {name: counts.created for name, counts in result.sections.items()} == {
        name: len(document[name]) for name in document if name != "version" and document[name]
    }
    assert Node.objects.get(hostname="gpu001").tags.get().slug == "training"
    assert Nic.objects.get(node__hostname="gpu001", name="ens1np0").peer_gpus.count() == 2
    # Importing the same document again finds everything as it is.
    again = import_inventory(text=as_json, fmt="json", user=admin)
    assert again.totals.created == again.totals.updated == 0
    assert again.totals.unchanged == sum(len(document[name]) for name in result.sections)


def test_document_names_objects_by_natural_keys_in_a_constant_number_of_queries(inventory):
    with CaptureQueriesContext(connection) as demo_queries:
        document = json.loads(export_inventory(fmt="json"))
    factories.make_node(rack=Rack.objects.get(name="r02"), u_position=40, u_height=2)
    with CaptureQueriesContext(connection) as more_queries:
        export_inventory(fmt="json")

    assert len(more_queries) == len(demo_queries) <= 25  # one a section, and the many-to-many sets
    node = next(row for row in document["nodes"] if row["hostname"] == "gpu001")
    assert node["rack"] == {"site": "demo-dc", "name": "r01"} and node["gpu_sku"] == "H200 SXM"
    assert node["tags"] == ["training"]
    cable = next(row for row in document["cables"] if row["a"] == {"node": "gpu001", "nic": "ens1np0"})
    assert cable["b"] == {"switch": "leaf-r01-a", "port": "swp1"}
    assert document["host_keys"][0]["approved_by"] == "admin"
    assert not any(
        "id" in row or "public_id" in row for rows in document.values() if isinstance(rows, list) for row in rows
    )


AWKWARD_TEXT = [
    'line one\nline two: "quoted" # not a comment',
    " leading space",
    "trailing space ",
    "yes",
    "null",
    "~",
    "007",
    "10:20:30",
    "2.4",
    "2024-05-01",
    "- dash",
    "{braces}, [brackets]",
    "emoji \U0001f680",
    "line\u2028separator and C1\x85control",
    "back\\slash",
    "",
]


def test_yaml_and_json_exports_hold_the_same_document(demo_cluster):
    for n, text in enumerate(AWKWARD_TEXT):
        Tag.objects.create(name=text or "empty", slug=f"awkward-{n}", colour="#000000")
        Site.objects.create(name=f"Awkward {n}", slug=f"awkward-{n}", description=text)
    leaf = Switch.objects.get(name="leaf-r01-a")
    Cable.objects.create(a_switch=leaf, a_port="Eth1/1:2", b_switch=leaf, b_port="Eth1/2:1", speed_gbps=400)

    assert yaml.safe_load(export_inventory(fmt="yaml")) == json.loads(export_inventory(fmt="json"))


# --- CSV ------------------------------------------------------------------------------------------------------------


def test_csv_creates_new_nodes_and_updates_known_ones(demo_cluster, admin):
    text = csv_text(
        "gpu900,compute,racked,demo-dc,r01,40,4,10.10.9.1,10.20.9.1,H200 SXM,8,Xeon,2,112,2048,2,training;inference",
        "spare01,storage,planned,,,,,,,,,,,,,,",
    )
    updated = export_nodes_csv().splitlines()
    gpu002 = next(line for line in updated if line.startswith("gpu002,")).replace(",ready,", ",degraded,")

    result = import_inventory(text=text + gpu002 + "\n", fmt="csv", user=admin)

    assert result.sections["nodes"].as_dict() == {"created": 2, "updated": 1, "unchanged": 0}
    node = Node.objects.get(hostname="gpu900")
    assert (node.rack.name, node.u_position, node.management_ip, node.gpu_sku.name) == (
        "r01",
        40,
        "10.10.9.1",
        "H200 SXM",
    )
    assert sorted(node.tags.values_list("slug", flat=True)) == ["inference", "training"]
    spare = Node.objects.get(hostname="spare01")
    assert (spare.rack, spare.u_height, spare.management_ip) == (None, 1, None)
    assert Node.objects.get(hostname="gpu002").status == NodeStatus.DEGRADED


def test_csv_export_reads_back_unchanged(demo_cluster):
    result = import_inventory(text=export_nodes_csv(), fmt="csv")
    assert result.sections["nodes"].as_dict() == {"created": 0, "updated": 0, "unchanged": 35}


def test_csv_with_bad_rows_names_each_line_and_field_and_imports_nothing(demo_cluster, admin):
    nodes, audits = Node.objects.count(), AuditEntry.objects.count()
    text = csv_text(
        "gpu900,compute,racked,demo-dc,r01,40,4,10.10.9.1,,,,,,,,,",  # 2: fine on its own
        "gpu901,compute,racked,demo-dc,r99,1,4,,,,,,,,,,",  # 3: no such rack
        "gpu902,compute,racked,demo-dc,r01,5,4,,,,,,,,,,",  # 4: overlaps gpu001 at U3-U6
        "gpu903,compute,racked,,,,,10.10.0.300,,,,,,,,,",  # 5: not an IP address
        "gpu900,compute,racked,,,,,,,,,,,,,,",  # 6: gpu900 again
    )

    problems = rejected(text=text, fmt="csv", user=admin)

    assert problems == [
        ("nodes", 3, "rack"),
        ("nodes", 4, "u_position"),
        ("nodes", 5, "management_ip"),
        ("nodes", 6, "hostname"),
    ]
    assert Node.objects.count() == nodes and AuditEntry.objects.count() == audits
    assert not Node.objects.filter(hostname="gpu900").exists()


def test_csv_with_an_unknown_column_is_refused_at_the_header(db):
    assert rejected(text="hostname,colour\nx,red\n", fmt="csv") == [("nodes", 1, "colour")]


# --- JSON and YAML documents ----------------------------------------------------------------------------------------

YAML_NICS = """\
version: 1
nics:
  - node: gpu001
    name: ens1np0
    mtu: 9000
  - node: gpu001
    name: ens2np0
    speed: 400
    mtu: 20000
  - node: gpu999
    name: ens1np0
    speed_gbps: 400
"""


def test_yaml_problems_point_at_the_line_of_the_field(demo_cluster):
    problems = rejected(text=YAML_NICS, fmt="yaml")

    assert problems == [("nics", 8, "speed"), ("nics", 9, "mtu"), ("nics", 10, "node")]
    assert Nic.objects.get(node__hostname="gpu001", name="ens1np0").mtu == 9000


def test_json_problems_point_at_the_line_of_the_item(demo_cluster):
    text = export_inventory(fmt="json")
    lines = text.splitlines()
    number = next(i for i, line in enumerate(lines, 1) if '"node": "gpu003", "name": "ens2np0"' in line)
    lines[number - 1] = lines[number - 1].replace('"mtu": 9000', '"mtu": 100000')

    with pytest.raises(ImportRejected) as caught:
        import_inventory(text="\n".join(lines), fmt="json")

    [problem] = caught.value.problems
    assert (problem.section, problem.line, problem.field) == ("nics", number, "mtu")
    assert "9216" in problem.message


def test_malformed_json_is_one_problem_at_its_line(db):
    text = '{\n  "version": 1,\n  "nodes": [\n    {"hostname": "gpu900",}\n  ]\n}\n'
    with pytest.raises(ImportRejected) as caught:
        import_inventory(text=text, fmt="json")
    [problem] = caught.value.problems
    assert (problem.section, problem.line) == ("document", 4)
    assert "column" in problem.message


@pytest.mark.parametrize(
    ("text", "fmt", "expected"),
    [
        ("nodes: [}", "yaml", [("document", 1, None)]),
        ("- 1\n- 2\n", "yaml", [("document", 1, None)]),
        ('{"nodes": []}', "json", [("document", 1, "version")]),
        ("version: 2\nnodes: []\nnodez: []\n", "yaml", [("document", 1, "version"), ("document", 3, "nodez")]),
    ],
    ids=["bad-syntax", "not-a-mapping", "no-version", "wrong-version-and-section"],
)
def test_a_document_of_the_wrong_shape_is_refused(db, text, fmt, expected):
    assert rejected(text=text, fmt=fmt) == expected


def test_text_fields_refuse_numbers_yaml_made_from_unquoted_versions(demo_cluster):
    text = "version: 1\nfirmware:\n  - {node: gpu001, component: bmc, version: 7.10}\n"
    with pytest.raises(ImportRejected) as caught:
        import_inventory(text=text, fmt="yaml")
    [problem] = caught.value.problems
    assert (problem.line, problem.field) == (3, "version") and "quotes" in problem.message


def test_references_resolve_to_rows_earlier_in_the_same_file(db, admin):
    document = {
        "version": 1,
        "sites": [{"slug": "hall-2", "name": "Hall 2"}],
        "racks": [{"site": "hall-2", "name": "h2r01", "power_budget_kw": 40}],
        "nodes": [{"hostname": "edge01", "rack": {"site": "hall-2", "name": "h2r01"}, "u_position": 1}],
        "nics": [{"node": "edge01", "name": "eno1", "speed_gbps": 25}],
        "switches": [{"name": "tor-h2", "site": "hall-2", "plane": "mgmt", "tier": "management", "port_count": 48,
                      "port_speed_gbps": 25}],
        "cables": [{"a": {"node": "edge01", "nic": "eno1"}, "b": {"switch": "tor-h2", "port": "swp1"},
                    "speed_gbps": 25}],
    }  # fmt: skip

    result = import_inventory(text=json.dumps(document), fmt="json", user=admin)

    assert result.totals.created == 6
    cable = Cable.objects.get()
    assert (cable.a_nic.node.hostname, cable.b_switch.name, cable.b_port) == ("edge01", "tor-h2", "swp1")


def test_a_port_taken_earlier_in_the_file_is_a_problem(demo_cluster):
    taken = {"switch": "leaf-r01-a", "port": "swp1"}  # gpu001:ens1np0's cable
    document = {"version": 1, "cables": [{"a": {"node": "mgmt01", "nic": "eno1"}, "b": taken, "speed_gbps": 25}]}
    assert rejected(text=json.dumps(document), fmt="json") == [("cables", 1, "b")]


def test_import_is_audited_as_an_import_by_the_user(admin):
    import_inventory(text=csv_text("gpu900,compute,planned,,,,,,,,,,,,,,"), fmt="csv", user=admin)

    entry = AuditEntry.objects.get(object_type="inventory.node", object_repr="gpu900")
    assert (entry.source, entry.actor, entry.action) == ("import", admin, "create")
    assert entry.changes["hostname"] == [None, "gpu900"]


def test_dry_run_counts_but_saves_nothing(db):
    result = import_inventory(text=csv_text("gpu900,compute,planned,,,,,,,,,,,,,,"), fmt="csv", dry_run=True)
    assert result.dry_run and result.sections["nodes"].created == 1
    assert not Node.objects.filter(hostname="gpu900").exists()


# --- Management commands --------------------------------------------------------------------------------------------


def test_commands_export_to_a_file_and_import_it_back(demo_cluster, tmp_path, capsys):
    target = tmp_path / "inventory.yaml"
    call_command("export_inventory", "-o", str(target))
    assert yaml.safe_load(target.read_text())["version"] == 1

    call_command("import_inventory", str(target))

    assert "Imported: 0 created, 0 updated" in capsys.readouterr().out


def test_import_command_lists_every_problem_and_fails(demo_cluster, tmp_path, capsys):
    target = tmp_path / "nodes.csv"
    target.write_text(csv_text("gpu900,compute,racked,demo-dc,r99,1,4,,,,,,,,,,", "gpu901,bogus,,,,,,,,,,,,,,,"))

    with pytest.raises(CommandError, match="2 problems; nothing was imported"):
        call_command("import_inventory", str(target))

    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(f"{target}:2: nodes rack: No rack 'r99' in site 'demo-dc'")
    assert err[1].startswith(f"{target}:3: nodes role: ")
    assert not Node.objects.filter(hostname__in=["gpu900", "gpu901"]).exists()


# --- API ------------------------------------------------------------------------------------------------------------

EXPORT, IMPORT = "/api/inventory/export/", "/api/inventory/import/"


def upload(name: str, text: str):
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile(name, text.encode(), content_type="application/octet-stream")


def test_anonymous_callers_get_401(api_client, db):
    assert api_client.get(EXPORT).status_code == 401
    assert api_client.post(IMPORT, {"file": upload("n.csv", HEADER)}, format="multipart").status_code == 401


def test_viewers_export_every_format_but_cannot_import(api_as, viewer):
    factories.make_node(rack=factories.make_rack(), u_position=1)
    client = api_as(viewer)
    as_json = client.get(EXPORT)
    as_yaml = client.get(EXPORT, {"as": "yaml"})
    as_csv = client.get(EXPORT, {"format": "csv"})  # DRF's own name for the renderer choice, handled here

    assert as_json.status_code == as_yaml.status_code == as_csv.status_code == 200
    assert as_json["Content-Type"] == "application/json" and json.loads(as_json.content)["version"] == 1
    assert as_yaml["Content-Type"] == "application/yaml" and yaml.safe_load(as_yaml.content)["version"] == 1
    assert as_csv["Content-Type"].startswith("text/csv") and as_csv.content.decode().startswith("hostname,role,")
    assert as_yaml["Content-Disposition"].startswith('attachment; filename="rackpilot-inventory-')
    assert as_yaml["Content-Disposition"].endswith('.yaml"')
    assert client.get(EXPORT, {"as": "xml"}).status_code == 400
    response = client.post(IMPORT, {"file": upload("n.csv", csv_text("gpu900,,,,,,,,,,,,,,,,"))}, format="multipart")
    assert response.status_code == 403
    assert not Node.objects.filter(hostname="gpu900").exists()


def test_operators_cannot_import_either(api_as, operator):
    response = api_as(operator).post(IMPORT, {"file": upload("n.csv", HEADER)}, format="multipart")
    assert response.status_code == 403


def test_admins_import_an_uploaded_file(api_as, admin):
    text = csv_text("gpu900,compute,planned,,,,,,,,,,,,,,")
    response = api_as(admin).post(IMPORT, {"file": upload("new-nodes.csv", text)}, format="multipart")

    assert response.status_code == 200
    assert response.json()["sections"]["nodes"] == {"created": 1, "updated": 0, "unchanged": 0}
    entry = AuditEntry.objects.filter(object_type="inventory.node", object_repr="gpu900").get()
    assert (entry.source, entry.actor) == ("import", admin)


def test_admins_import_a_json_body_and_see_every_problem(api_as, admin):
    good = {"version": 1, "tags": [{"slug": "burn-in", "name": "Burn-in"}]}
    bad = {
        "version": 1,
        "nodes": [{"hostname": "gpu900", "rack": {"site": "demo-dc", "name": "r99"}}, {"hostname": "-"}],
    }
    client = api_as(admin)

    assert client.post(IMPORT, good, format="json").json()["totals"]["created"] == 1
    response = client.post(IMPORT, bad, format="json")

    assert response.status_code == 400
    assert [(p["section"], p["field"]) for p in response.json()["problems"]] == [
        ("nodes", "rack"),
        ("nodes", "hostname"),
    ]
    assert all(p["line"] == 1 for p in response.json()["problems"])  # DRF's client sends the body on one line
    assert not Node.objects.filter(hostname="gpu900").exists()


def test_admins_get_a_problem_for_a_file_of_unknown_format(api_as, admin):
    response = api_as(admin).post(IMPORT, {"file": upload("nodes.txt", HEADER)}, format="multipart")
    assert response.status_code == 400
    assert response.json()["problems"][0]["field"] == "format"


def test_schema_of_the_transfer_api_generates_without_warnings():
    from drf_spectacular.drainage import GENERATOR_STATS
    from drf_spectacular.generators import SchemaGenerator
    from drf_spectacular.validation import validate_schema

    GENERATOR_STATS.reset()
    router = SimpleRouter()
    router.register("inventory", InventoryTransferViewSet, "inventory")
    generator = SchemaGenerator(patterns=[path("api/", include(router.urls))])
    schema = generator.get_schema(request=None, public=True)

    validate_schema(schema)
    assert not GENERATOR_STATS, "drf-spectacular warned about the transfer API"
    export = schema["paths"]["/api/inventory/export/"]["get"]
    assert [p["name"] for p in export["parameters"]] == ["as"]
    assert set(export["responses"]["200"]["content"]) == {"application/json", "application/yaml", "text/csv"}
