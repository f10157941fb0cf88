"""The API's pagination: DRF's limit/offset, bounded and strict. A huge `limit` or `offset` is a clear answer rather
than a number the database cannot hold (PostgreSQL's LIMIT and OFFSET are 64-bit), and a `limit` that is not a
positive whole number is refused rather than silently replaced by the default page size."""

import re

from rest_framework.exceptions import ValidationError
from rest_framework.pagination import LimitOffsetPagination

MAX_OFFSET = 2**53  # past any table's length, and below every database's integer limits
WHOLE_NUMBER = re.compile(r"-?[0-9]{1,20}")


def _whole_number(request, name: str, *, minimum: int) -> int | None:
    raw = request.query_params.get(name)
    if raw is None:
        return None
    if not WHOLE_NUMBER.fullmatch(raw):  # int() would also take " 5", "1_0" and other scripts' digits
        raise ValidationError({name: ["A whole number is required."]})
    value = int(raw)
    if value < minimum:
        raise ValidationError({name: [f"Ensure this value is at least {minimum}."]})
    if value > MAX_OFFSET:
        raise ValidationError({name: [f"Ensure this value is at most {MAX_OFFSET}."]})
    return value


class BoundedLimitOffsetPagination(LimitOffsetPagination):
    # No page-size cap a client would notice (the job page asks for a whole matrix at once): only the database's.
    max_limit = MAX_OFFSET

    def get_limit(self, request) -> int | None:
        limit = _whole_number(request, self.limit_query_param, minimum=1)
        return self.default_limit if limit is None else limit

    def get_offset(self, request) -> int:
        return _whole_number(request, self.offset_query_param, minimum=0) or 0

    def get_schema_operation_parameters(self, view) -> list[dict]:
        parameters = super().get_schema_operation_parameters(view)
        minimum = {self.limit_query_param: 1, self.offset_query_param: 0}
        for parameter in parameters:
            if parameter["name"] in minimum:
                parameter["schema"].update(minimum=minimum[parameter["name"]], maximum=MAX_OFFSET)
        return parameters
