from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import viewsets
from rest_framework.exceptions import ValidationError
from rest_framework.parsers import FormParser, JSONParser, MultiPartParser
from rest_framework.response import Response

from apps.accounts.choices import Role
from apps.diagnosis import services
from apps.diagnosis.api.serializers import TriageResultSerializer, TriageTextSerializer, TriageUploadSerializer


class TriageViewSet(viewsets.ViewSet):
    """Log triage: POST a log, get the problems it shows with the lines they come from. Reads only (viewers too)."""

    parser_classes = [JSONParser, MultiPartParser, FormParser]
    write_role = Role.VIEWER  # the POST stores nothing

    @extend_schema(
        request={"application/json": TriageTextSerializer, "multipart/form-data": TriageUploadSerializer},
        responses={
            200: TriageResultSerializer,
            400: OpenApiResponse(description="Empty, binary or oversized input; the body names the field."),
        },
    )
    def create(self, request):
        """Triage {"text": ...} or a multipart `file`; an unrecognised log answers 200 with no findings."""
        limit = services.max_bytes()
        _refuse_oversized_body(request, limit)  # before the body is read
        if not hasattr(request.data, "get"):  # a JSON list or number: not the object the schema documents
            raise ValidationError({"non_field_errors": ['Send {"text": ...} or a multipart file.']})
        try:
            source, log = services.read_submission(
                text=request.data.get("text"), upload=request.FILES.get("file"), limit=limit
            )
        except services.TriageInputError as error:
            raise ValidationError({error.field: [error.message]}) from None
        result = services.triage_text(text=log, source=source)
        return Response(TriageResultSerializer(result.to_dict()).data)


# Room for the multipart envelope; JSON may write one byte of text as up to six (a \u escape).
ENVELOPE_BYTES = 64 << 10
JSON_EXPANSION = 6


def _refuse_oversized_body(request, limit: int) -> None:
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    multipart = request.content_type.startswith("multipart/")
    allowed = (limit if multipart else JSON_EXPANSION * limit) + ENVELOPE_BYTES
    if length > allowed:
        field = "file" if multipart else "text"
        raise ValidationError({field: [f"The request is {length} bytes; a log may be at most {limit} bytes."]})
