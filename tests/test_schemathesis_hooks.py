"""The fuzz test's allowance for refusals no schema can state stays narrow: one other message fails the request."""

from tests.schemathesis_hooks import is_data_dependent


def test_refusals_that_depend_on_stored_data_or_on_several_fields_are_allowed():
    assert is_data_dependent(
        {"rack": ["No rack matches 'r99'."], "hostname": ["node with this hostname already exists."]}
    )
    assert is_data_dependent({"targets": {"non_field_errors": ["Name nodes, racks, tags or a role."]}})
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
