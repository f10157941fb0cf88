"""Hostile import files: alias bombs, duplicate keys, huge numbers, huge values; and CSV exports a spreadsheet
would run as formulas. Each is refused with a short message naming the line, and changes nothing."""

import csv
import io
import json

import pytest

from apps.inventory.models import Node
from apps.inventory.transfer import ImportRejected, export_nodes_csv, import_inventory
from tests import factories

pytestmark = pytest.mark.django_db

IMPORT = "/api/inventory/import/"

# 536 bytes that PyYAML expands to about 10^9 strings: each level names the previous one nine times.
ALIAS_BOMB = 'version: 1\na: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{chr(98 + n)}: &{chr(98 + n)} [{','.join([f'*{chr(97 + n)}'] * 9)}]\n" for n in range(8)
)


def rejected(text: str, fmt: str) -> list:
    with pytest.raises(ImportRejected) as raised:
        import_inventory(text=text, fmt=fmt)
    assert not Node.objects.exists()
    return raised.value.problems


def test_an_alias_bomb_is_refused_at_its_first_anchor_with_a_short_reply(api_as, admin):
    assert len(ALIAS_BOMB) < 600
    response = api_as(admin).post(IMPORT, ALIAS_BOMB, content_type="application/yaml")
    assert response.status_code == 400
    assert len(response.content) < 2000
    [problem] = response.json()["problems"]
    assert problem["line"] == 2 and "alias" in problem["message"].lower()


def test_an_alias_is_refused_even_when_small():
    text = "version: 1\nsites:\n- &dc {slug: dc1, name: DC 1}\n- *dc\n"
    [problem] = rejected(text, "yaml")
    assert problem.line == 3 and "anchor" in problem.message.lower()


def test_a_key_given_twice_in_yaml_is_an_error_naming_its_line():
    text = "version: 1\nnodes:\n- hostname: n1\n  role: compute\n  hostname: n2\n"
    [problem] = rejected(text, "yaml")
    assert (problem.line, problem.field) == (5, "hostname")
    assert "twice" in problem.message


def test_a_section_given_twice_in_yaml_is_an_error():
    text = "version: 1\nnodes: []\nnodes:\n- hostname: n1\n"
    [problem] = rejected(text, "yaml")
    assert (problem.line, problem.field) == (3, "nodes")


def test_a_key_given_twice_in_json_is_an_error_naming_its_line():
    text = '{"version": 1,\n "nodes": [\n  {"hostname": "n1",\n   "hostname": "n2"}]}\n'
    [problem] = rejected(text, "json")
    assert (problem.line, problem.field) == (4, "hostname")
    assert "twice" in problem.message


@pytest.mark.parametrize("fmt", ["json", "yaml"])
@pytest.mark.parametrize("digits", [30, 5000])
def test_a_huge_whole_number_is_a_field_error(fmt, digits):
    number = "9" * digits
    if fmt == "json":
        text = '{"version": 1, "nodes": [\n{"hostname": "n1", "u_height": ' + number + "}]}"
    else:
        text = f"version: 1\nnodes:\n- hostname: n1\n  u_height: {number}\n"
    problems = rejected(text, fmt)
    assert [(p.field, p.line) for p in problems] == [("u_height", 2 if fmt == "json" else 4)]
    assert len(problems[0].message) < 200


@pytest.mark.parametrize("number", ["1e999999999", "-1E+999999999", "1" + "0" * 1_000_000])
def test_a_number_too_big_to_convert_is_refused_before_converting_it(number):
    text = '{"version": 1, "nodes": [\n{"hostname": "n1", "u_height": ' + number + "}]}"
    [problem] = rejected(text, "json")
    assert (problem.field, problem.line) == ("u_height", 2)
    assert "out of range" in problem.message


@pytest.mark.parametrize("column", ["u_height", "memory_gib"])
def test_a_huge_whole_number_in_csv_is_a_field_error(column):
    text = f"hostname,{column}\nn1,{'9' * 5000}\n"
    [problem] = rejected(text, "csv")
    assert (problem.field, problem.line) == (column, 2)


def test_a_huge_number_over_the_api_is_a_400_naming_the_field(api_as, admin):
    body = '{"version": 1, "nodes": [{"hostname": "n1", "u_height": ' + "9" * 5000 + "}]}"
    response = api_as(admin).post(IMPORT, body, content_type="application/json")
    assert response.status_code == 400
    assert [p["field"] for p in response.json()["problems"]] == ["u_height"]


def test_echoed_values_are_cut_short():
    long = "x" * 100_000
    rows = rejected(json.dumps({"version": 1, "nodes": [{"hostname": "n1", "role": long, long: 1}]}), "json")
    sections = rejected(json.dumps({"version": 1, long: []}), "json")
    csv_columns = rejected(f"hostname,{long}\nn1,1\n", "csv")
    problems = rows + sections + csv_columns
    assert len(problems) == 4
    assert all(len(p.message) < 400 and len(p.field or "") <= 60 for p in problems), [len(p.message) for p in problems]


FORMULAS = ["=1+2", "+1", "-1+2", "@SUM(1)", "\tx", "\rx"]


@pytest.mark.parametrize("value", FORMULAS)
def test_csv_export_escapes_cells_a_spreadsheet_would_run(value):
    factories.make_node(hostname="n1", cpu_model=value)
    [row] = list(csv.DictReader(io.StringIO(export_nodes_csv())))
    assert row["cpu_model"] == "'" + value


@pytest.mark.parametrize("value", FORMULAS)
def test_csv_import_reads_back_escaped_cells(value):
    factories.make_node(hostname="n1", cpu_model=value)
    text = export_nodes_csv()
    Node.objects.filter(hostname="n1").update(cpu_model="other")
    import_inventory(text=text, fmt="csv")
    assert Node.objects.get(hostname="n1").cpu_model == value


def test_the_api_cuts_what_it_echoes_of_a_format_or_a_file_name(api_as, admin):
    client = api_as(admin)
    export = client.get("/api/inventory/export/", {"as": "x" * 100_000})
    assert export.status_code == 400 and len(export.content) < 500
    upload = io.BytesIO(b"hostname\nn1\n")
    upload.name = "n" * 5000 + ".txt"
    imported = client.post(IMPORT, {"file": upload}, format="multipart")
    assert imported.status_code == 400 and len(imported.content) < 500
