"""The OpenAPI schema types a deployment's `options` and `criteria` as the objects the services check: what the
schema allows the services take, and what it refuses they refuse too, naming the path."""

import jsonschema
import pytest
import yaml
from django.core.management import call_command
from django.urls import reverse

from apps.deployments import criteria
from apps.deployments.options import PLAN_DEFAULTS


def _json_schema(node):
    """OpenAPI 3.0's `nullable` as JSON Schema's null type, so jsonschema reads the schema as a client would."""
    if isinstance(node, dict):
        node = {key: _json_schema(value) for key, value in node.items()}
        if node.pop("nullable", False):
            node["type"] = [node["type"], "null"]
        return node
    if isinstance(node, list):
        return [_json_schema(item) for item in node]
    return node


@pytest.fixture(scope="module")
def components(tmp_path_factory):
    target = tmp_path_factory.mktemp("schema") / "schema.yaml"
    call_command("spectacular", "--file", str(target))
    return yaml.safe_load(target.read_text())["components"]["schemas"]


def test_the_request_schemas_are_objects_with_their_sections_and_checks(components):
    options = components["DeploymentOptionsEdit"]
    assert options["type"] == "object" and options["additionalProperties"] is False
    assert set(options["properties"]) == set(PLAN_DEFAULTS)
    assert options["properties"]["network"]["properties"]["mtu"] == {"type": "integer", "minimum": 68, "maximum": 9216}
    assert set(components["AcceptanceCriteriaEdit"]["properties"]) == set(criteria.DEFAULTS)
    create = components["DeploymentCreateRequest"]["properties"]
    assert create["options"] == {"$ref": "#/components/schemas/DeploymentOptionsEdit"} or "allOf" in create["options"]


def test_the_defaults_are_valid_by_the_schemas(components):
    jsonschema.validate(PLAN_DEFAULTS, _json_schema(components["DeploymentOptionsEdit"]))
    jsonschema.validate(criteria.DEFAULTS, _json_schema(components["AcceptanceCriteriaEdit"]))
    jsonschema.validate(PLAN_DEFAULTS, _json_schema(components["DeploymentOptions"]))


@pytest.mark.parametrize(
    ("edits", "path"),
    [
        ({"options": {"network": {"mtu": 99999}}}, "options.network.mtu"),
        ({"options": {"versions": {"cuda": "1.0"}}}, "options.versions.cuda"),
        ({"options": {"cgroup": {"slice": "evil; rm"}}}, "options.cgroup.slice"),
        ({"options": {"nosuch": {}}}, "options.nosuch"),
        ({"criteria": {"hbm_bandwidth": {"retries": 11}}}, "criteria.hbm_bandwidth.retries"),
    ],
)
@pytest.mark.django_db
def test_what_the_schema_refuses_the_api_refuses_naming_the_path(
    components, demo_cluster, operator, api_as, edits, path
):
    schema = _json_schema(components["DeploymentOptionsEdit" if "options" in edits else "AcceptanceCriteriaEdit"])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(next(iter(edits.values())), schema)
    body = {"name": "d", "targets": {"nodes": ["gpu031"]}, **edits}
    response = api_as(operator).post(reverse("api:deployment-list"), body, format="json")
    assert response.status_code == 400
    assert path in str(response.json()), response.json()
