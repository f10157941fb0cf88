"""Import and export of the whole inventory over the API: thin views over apps.inventory.transfer.

The export's format is the `as` query parameter (`?as=yaml`); `?format=` is accepted too, although DRF would
otherwise read it as a choice of renderer. Whatever the format, errors come back as JSON.
"""

from django.http import HttpResponse
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.negotiation import BaseContentNegotiation, DefaultContentNegotiation
from rest_framework.parsers import BaseParser, MultiPartParser
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.viewsets import ViewSet

from apps.accounts.choices import Role
from apps.core.text import echo
from apps.inventory.transfer import (
    DOCUMENT_VERSION,
    IMPORT_FORMATS,
    SECTION_NAMES,
    ImportProblem,
    ImportRejected,
    export_inventory,
    export_nodes_csv,
    guess_format,
    import_inventory,
)
from apps.inventory.transfer.background import goes_to_background, start_background_import

MEDIA_TYPES = {"json": "application/json", "yaml": "application/yaml", "csv": "text/csv; charset=utf-8"}


class JsonOnly(BaseContentNegotiation):
    """Answers in JSON whatever `?format=` says: on these views it names the file's format, not a renderer."""

    def select_parser(self, request, parsers):
        return DefaultContentNegotiation().select_parser(request, parsers)

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type


class RawDocument:
    """A request body kept as it came, for the importer to parse (and to point at its lines)."""

    def __init__(self, content: bytes, fmt: str):
        self.content, self.fmt = content, fmt


class RawJsonParser(BaseParser):
    media_type = "application/json"
    fmt = "json"

    def parse(self, stream, media_type=None, parser_context=None) -> RawDocument:
        return RawDocument(stream.read(), self.fmt)


class RawYamlParser(RawJsonParser):
    media_type = "application/yaml"
    fmt = "yaml"


class RawCsvParser(RawJsonParser):
    media_type = "text/csv"
    fmt = "csv"


class CountsSerializer(serializers.Serializer):
    created = serializers.IntegerField()
    updated = serializers.IntegerField()
    unchanged = serializers.IntegerField()


class InventoryImportResultSerializer(serializers.Serializer):
    dry_run = serializers.BooleanField(help_text="True when nothing was saved because `dry_run` was asked for.")
    sections = serializers.DictField(child=CountsSerializer(), help_text="Counts per section of the document.")
    totals = CountsSerializer()


class InventoryImportProblemSerializer(serializers.Serializer):
    section = serializers.CharField(help_text="A section of the document (`nodes`, …), or `document`.")
    line = serializers.IntegerField(allow_null=True, help_text="Line in the file (a CSV's header is line 1).")
    field = serializers.CharField(allow_null=True)
    message = serializers.CharField()


class InventoryImportRejectedSerializer(serializers.Serializer):
    problems = InventoryImportProblemSerializer(many=True)


class InventoryImportQueuedSerializer(serializers.Serializer):
    job = serializers.UUIDField(help_text="The background job importing the file.")
    url = serializers.URLField(help_text="The job: its status and summary (`GET /api/jobs/{id}/`).")
    events = serializers.URLField(help_text="Its events: progress, then every problem or the counts.")
    page = serializers.URLField(help_text="The job's page, which follows it live.")


class InventoryImportUploadSerializer(serializers.Serializer):
    file = serializers.FileField(help_text="A document from the export (JSON or YAML), or a nodes CSV.")
    format = serializers.ChoiceField(
        choices=IMPORT_FORMATS, required=False, help_text="Default: from the file name's extension."
    )


def _flag(value: str | None) -> bool | str | None:
    if value is None or value == "":
        return None
    return {"1": True, "true": True, "yes": True, "0": False, "false": False, "no": False}.get(value.lower(), "invalid")


def _rejected(problems: list[ImportProblem]) -> Response:
    return Response({"problems": [problem.as_dict() for problem in problems]}, status=status.HTTP_400_BAD_REQUEST)


def _request_problem(field: str, message: str) -> Response:
    return _rejected([ImportProblem("document", None, field, message)])


class InventoryTransferViewSet(ViewSet):
    """`/api/inventory/export/`: the whole inventory as one document, or the nodes as CSV (viewers and up).
    `/api/inventory/import/`: create or update inventory objects from an export or a nodes CSV, all or nothing
    (admins only)."""

    write_role = Role.ADMIN
    content_negotiation_class = JsonOnly
    renderer_classes = [JSONRenderer]

    @extend_schema(
        operation_id="inventory_export",
        summary="Export the inventory",
        description=(
            "The whole inventory as one JSON or YAML document, objects naming each other by natural keys; or one "
            "CSV row per node. `?format=` is accepted as another name for `as`."
        ),
        parameters=[
            OpenApiParameter("as", str, enum=["json", "yaml", "csv"], default="json", description="The file's format.")
        ],
        responses={
            (200, "application/json"): OpenApiTypes.OBJECT,
            (200, "application/yaml"): OpenApiTypes.OBJECT,  # the same document as the JSON, as YAML
            (200, "text/csv"): OpenApiTypes.STR,
        },
    )
    @action(detail=False, methods=["get"], url_path="export")
    def export(self, request):
        fmt = request.query_params.get("as") or request.query_params.get("format") or "json"
        if fmt not in MEDIA_TYPES:
            raise ValidationError({"as": [f"Choose json, yaml or csv, not {echo(fmt)}."]})
        text = export_nodes_csv() if fmt == "csv" else export_inventory(fmt=fmt)
        what = "nodes" if fmt == "csv" else "inventory"
        response = HttpResponse(text, content_type=MEDIA_TYPES[fmt])
        response["Content-Disposition"] = (
            f'attachment; filename="rackpilot-{what}-{timezone.now():%Y%m%d-%H%M%S}.{fmt}"'
        )
        return response

    @extend_schema(
        operation_id="inventory_import",
        summary="Import inventory",
        description=(
            "Upload a file as the multipart field `file` (format from its name, or the field `format`), or send the "
            "document as the request body. Objects are created or updated by natural key; objects the file does not "
            "mention are left alone. All or nothing: any problem rejects the whole file with every problem listed."
        ),
        parameters=[
            OpenApiParameter("dry_run", bool, default=False, description="Check and count; save nothing."),
            OpenApiParameter(
                "background",
                bool,
                description=(
                    "true: import as a background job (202 with the job's URL; progress and problems are its "
                    "events); false: in this request. Default: in the background when the file is larger than "
                    "RACKPILOT_IMPORT_BACKGROUND_BYTES (256 KiB)."
                ),
            ),
        ],
        request={
            "multipart/form-data": InventoryImportUploadSerializer,
            "application/json": OpenApiTypes.OBJECT,
            "application/yaml": OpenApiTypes.OBJECT,  # the same document as the JSON, as YAML
            "text/csv": OpenApiTypes.STR,
        },
        responses={
            200: InventoryImportResultSerializer,
            202: InventoryImportQueuedSerializer,
            400: InventoryImportRejectedSerializer,
        },
    )
    @action(
        detail=False,
        methods=["post"],
        url_path="import",
        url_name="import",
        parser_classes=[MultiPartParser, RawJsonParser, RawYamlParser, RawCsvParser],
    )
    def import_(self, request):
        data = request.data
        if isinstance(data, RawDocument):
            content, fmt = data.content, data.fmt
        else:
            upload = request.FILES.get("file")
            if upload is None:
                return _request_problem(
                    "file", "Upload the file as the multipart field 'file', or send it as the body."
                )
            fmt = data.get("format") or guess_format(upload.name)
            if fmt not in IMPORT_FORMATS:
                message = f"Cannot tell the format of {echo(upload.name)}; give json, yaml or csv."
                return _request_problem("format", message)
            content = upload.read()
        try:
            text = content.decode("utf-8")
        except UnicodeDecodeError as error:
            return _request_problem("file", f"The file is not UTF-8 text (byte {error.start}).")
        dry_run = request.query_params.get("dry_run", "").lower() in ("1", "true", "yes")
        background = _flag(request.query_params.get("background"))
        if background == "invalid":
            return _request_problem("background", "Give true or false.")
        if goes_to_background(len(content), background):
            name = getattr(request.FILES.get("file"), "name", "")
            queued = start_background_import(text=text, fmt=fmt, name=name, user=request.user, dry_run=dry_run)
            url = request.build_absolute_uri(queued.api_path)
            body = {
                "job": queued.job_id,
                "url": url,
                "events": f"{url}events/",
                "page": request.build_absolute_uri(queued.page_path),
            }
            return Response(body, status=status.HTTP_202_ACCEPTED, headers={"Location": url})
        try:
            result = import_inventory(text=text, fmt=fmt, user=request.user, dry_run=dry_run)
        except ImportRejected as rejected:
            return _rejected(rejected.problems)
        return Response(result.as_dict())


# The document's shape, which document_items() refuses at once when it is wrong: its version and its sections, each
# a list of rows, and nothing else. A row's fields are judged against the stored inventory and the document's other
# rows (an object is created or updated by its natural key, so what a row must hold depends on whether its object
# exists): docs/inventory.md lists them, and the 400 names the row and the field.
IMPORT_DOCUMENT = {
    "type": "object",
    "description": "A document as the export writes it.",
    "properties": {
        "version": {"type": "integer", "enum": [DOCUMENT_VERSION]},
        **{
            name: {"type": "array", "nullable": True, "items": {"type": "object", "description": f"One of the {name}."}}
            for name in SECTION_NAMES
        },
    },
    "required": ["version"],
    "additionalProperties": False,
}


def require_import_body(result, generator, request, public):
    """drf-spectacular postprocessing hook: an import without a body is refused, so the schema says it needs one
    (drf-spectacular marks a body required only for a serializer with required fields); a JSON or YAML body is the
    document, whose shape the schema states."""
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            if isinstance(operation, dict) and operation.get("operationId") == "inventory_import":
                operation["requestBody"]["required"] = True
                content = operation["requestBody"]["content"]
                for media_type in ("application/json", "application/yaml"):
                    content[media_type]["schema"] = IMPORT_DOCUMENT
    return result
