"""The fuzz test's allowance for refusals no schema can state stays narrow: one other message fails the request."""

from apps.inventory.transfer import SECTION_NAMES
from tests import schemathesis_hooks as hooks
from tests.schemathesis_hooks import IMPORT_SECTIONS, is_data_dependent


def test_refusals_that_depend_on_stored_data_or_on_several_fields_are_allowed():
    assert is_data_dependent(
        {"rack": ["No rack matches 'r99'."], "hostname": ["node with this hostname already exists."]}
    )
    assert is_data_dependent({"targets": {"non_field_errors": ["Name nodes, racks, tags or a role."]}})
    assert is_data_dependent({"capacity_tb": ["Ensure that there are no more than 1 decimal places."]})
    assert is_data_dependent(
        {
            "problems": [
                {
                    "section": "document",
                    "line": None,
                    "field": "file",
                    "message": ("Cannot tell the format of 'x.png'; give json, yaml or csv."),
                }
            ]
        }
    )


def test_a_rule_the_schema_should_have_stated_is_not_allowed():
    assert not is_data_dependent(
        {"rack": ["No rack matches 'r99'."], "ssh_port": ["Ensure this value is less than or equal to 65535."]}
    )
    assert not is_data_dependent({"power_budget_kw": ["A valid number is required."]})
    assert not is_data_dependent({})
    assert not is_data_dependent(None)


def _problem(section, message, line=2, field="hostname"):
    return {"section": section, "line": line, "field": field, "message": message}


def test_an_import_rows_problems_are_allowed_but_not_the_documents_shape():
    assert set(SECTION_NAMES) == IMPORT_SECTIONS
    row = _problem("nodes", "Missing 'hostname'.")
    assert is_data_dependent({"problems": [row, _problem("racks", "No site 'x' in the inventory or the file.")]})
    assert not is_data_dependent({"problems": [row, _problem("document", "Missing 'version' (this reads version 1).")]})
    assert not is_data_dependent({"problems": [_problem("Nodes", "Unknown section 'Nodes'; the sections are …")]})


def test_unique_per_parent_and_cross_field_refusals_are_allowed_by_their_own_words():
    assert is_data_dependent({"non_field_errors": ["This node already records a version for this component."]})
    assert is_data_dependent({"non_field_errors": ["This node already has a volume mounted here."]})
    assert is_data_dependent({"node": ["gpu001 has BMC settings already: change those."]})
    assert is_data_dependent({"target": ["gpu001 already has a ecc fault on 0."]})
    assert is_data_dependent({"password": ["IPMI 2.0 passwords are at most 20 bytes; this one is longer."]})
    assert not is_data_dependent({"password": ["A BMC password cannot hold control characters."]})
    assert not is_data_dependent({"address": ["Enter a host name (letters, digits, dashes and dots) or an IP address"]})
    assert not is_data_dependent({"non_field_errors": ["This field must be unique."]})
    assert is_data_dependent({"position": ["U3 overlaps gpu017 at U3."]})  # a PDU's one U, beside a node's
    assert is_data_dependent({"every_minutes": ["Give the interval in minutes (1 or more)."]})
    assert is_data_dependent({"private_key": ["Enter an OpenSSH or PEM private key ('-----BEGIN …' …)."]})


def test_a_refusal_of_the_parameters_is_the_kinds_where_a_request_names_a_kind():
    from tests.schemathesis_hooks import without_kind_parameters

    refused = {"parameters": {"run": ["This field is required."]}}
    assert without_kind_parameters("/api/job-templates/", refused) is None
    assert without_kind_parameters("/api/jobs/", refused) is None
    assert without_kind_parameters("/api/job-templates/", {**refused, "name": ["Too long."]}) == {"name": ["Too long."]}
    assert without_kind_parameters("/api/slos/", refused) == refused
    # Named at once beside the targets that match nothing (the fuzzer's find): only the targets are left to judge.
    both = {**refused, "targets": ["No node matches these targets."]}
    assert hooks.is_data_dependent(without_kind_parameters("/api/job-templates/", both))


def test_a_blank_refused_for_characters_only_python_strips_is_allowed_and_nothing_else_is():
    refused = {"site": ["No site matches 'x'."], "name": ["This field may not be blank."]}
    assert hooks.without_python_blanks(refused, {"site": "x", "name": "\u0085"}) == {"site": ["No site matches 'x'."]}
    assert hooks.without_python_blanks({"name": ["This field may not be blank."]}, {"name": "\x1f"}) is None
    assert hooks.without_python_blanks({"name": ["This field may not be blank."]}, {"name": ""}) == {
        "name": ["This field may not be blank."]
    }  # the schema should have said minLength 1
    # A list's items, named by index (a benchmark's nodes): the same rule, item by item.
    items = {"nodes": {"3": ["This field may not be blank."]}}
    assert hooks.without_python_blanks(items, {"nodes": ["gpu001", "a", "b", "\n"]}) is None
    assert hooks.without_python_blanks(items, {"nodes": ["gpu001", "a", "b", ""]}) == items
