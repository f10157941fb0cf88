"""OpenAPI: the error answers every operation can give, so a client (and Schemathesis) can rely on the schema.

drf-spectacular documents the success answer of each operation. The errors come from shared code paths — the
permission classes (401/403), object lookup (404), serializer and filter validation (400), protected deletes (409)
— so they are added here in one place, by what the operation has: a body or query parameters, a path id, a delete.
"""

import threading

from drf_spectacular.views import SpectacularAPIView
from rest_framework.response import Response

ERROR = {
    "type": "object",
    "description": "An error that is not about one field.",
    "properties": {"detail": {"type": "string"}},
    "required": ["detail"],
}
VALIDATION_ERROR = {
    "type": "object",
    "description": "Bad input: each key names a field (or parameter), its value lists what is wrong with it; "
    "`non_field_errors` holds what is about the input as a whole. Nested objects name nested fields.",
    "additionalProperties": {},
}

ERROR_REF = {"$ref": "#/components/schemas/Error"}
VALIDATION_ERROR_REF = {"$ref": "#/components/schemas/ValidationError"}
BODY_METHODS = {"post", "put", "patch"}


def _answer(description: str, schema: dict) -> dict:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _errors_of(method: str, operation: dict) -> dict[str, dict]:
    parameters = operation.get("parameters", [])
    takes_input = method in BODY_METHODS or any(p.get("in") == "query" for p in parameters)
    errors = {
        "401": _answer("Not signed in (no or a bad token or session).", ERROR_REF),
        "403": _answer("Signed in, but the role does not allow this.", ERROR_REF),
    }
    if takes_input:
        errors["400"] = _answer("Bad input, naming each field or parameter.", VALIDATION_ERROR_REF)
    if any(p.get("in") == "path" for p in parameters):
        errors["404"] = _answer("No such object.", ERROR_REF)
    if method == "delete":
        errors["409"] = _answer("Other objects still use it: it was not deleted.", ERROR_REF)
    return errors


FORM_MEDIA_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")
UUID_OR_NOTHING = "^(?:[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12})?$"


def _has_file(schema: dict, components: dict) -> bool:
    if "$ref" in schema:
        schema = components.get(schema["$ref"].rsplit("/", 1)[-1], {})
    return any(prop.get("format") == "binary" for prop in schema.get("properties", {}).values())


NO_NUL = "^[^\\u0000]*$"  # DRF's text fields refuse a NUL character (PostgreSQL cannot store one)


def _refuse_nul(schema: dict) -> None:
    for prop in schema.get("properties", {}).values():
        if prop.get("type") == "string" and not {"pattern", "enum", "format"} & set(prop) and not prop.get("readOnly"):
            prop["pattern"] = NO_NUL
        elif prop.get("type") == "array" and prop.get("items", {}).get("type") == "string":
            items = prop["items"]
            if not {"pattern", "enum", "format"} & set(items):
                items["pattern"] = NO_NUL


def document_json_bodies(result, generator, request, public):
    """drf-spectacular postprocessing hook: the API is documented as JSON. Form encodings stay accepted (the
    browsable API's forms post them) but are documented only where a file is uploaded: a form cannot say null,
    a nested object or a number, so every typed rule of the schema would read differently in one."""
    components = result.get("components", {}).get("schemas", {})
    for name, schema in components.items():
        if name.endswith("Request"):
            _refuse_nul(schema)
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            if not isinstance(operation, dict):
                continue
            content = operation.get("requestBody", {}).get("content", {})
            if "application/json" in content:
                for media_type in FORM_MEDIA_TYPES:
                    if media_type in content and not _has_file(content[media_type]["schema"], components):
                        del content[media_type]
            # An empty filter is no filter (django-filter reads it so; the pages' forms send every field).
            for parameter in operation.get("parameters", []):
                schema = parameter.get("schema", {})
                if parameter.get("in") != "query":
                    continue
                if schema.get("format") == "uuid":
                    parameter["schema"] = {"type": "string", "pattern": UUID_OR_NOTHING}
                elif schema.get("type") == "string" and "enum" in schema and "" not in schema["enum"]:
                    schema["enum"] = [*schema["enum"], ""]
                elif schema.get("type") == "string" and not {"pattern", "format"} & set(schema):
                    schema["pattern"] = NO_NUL
    return result


def add_error_responses(result, generator, request, public):
    """drf-spectacular postprocessing hook: documents the error answers of every operation under /api/."""
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas.setdefault("Error", ERROR)
    schemas.setdefault("ValidationError", VALIDATION_ERROR)
    for path, operations in result.get("paths", {}).items():
        if not path.startswith("/api/"):
            continue
        for method, operation in operations.items():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            for code, answer in _errors_of(method, operation).items():
                operation["responses"].setdefault(code, answer)
    return result


class SchemaView(SpectacularAPIView):
    """`/api/schema/`, generated once per process and served from then on: the schema comes from the code alone
    (SERVE_PUBLIC: the same for every signed-in reader), and generating it costs seconds (12-28 s on a loaded
    2-core machine), which every request paid before."""

    _generated: dict = {}
    _generating = threading.Lock()

    def _get_schema_response(self, request):
        version = self.api_version or request.version or self._get_version_parameter(request)
        with self._generating:
            if version not in self._generated:
                generator = self.generator_class(urlconf=self.urlconf, api_version=version, patterns=self.patterns)
                self._generated[version] = generator.get_schema(request=request, public=self.serve_public)
        return Response(
            data=self._generated[version],
            headers={"Content-Disposition": f'inline; filename="{self._get_filename(request, version)}"'},
        )
