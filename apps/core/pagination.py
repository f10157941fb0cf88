"""The API's pagination: DRF's limit/offset, bounded, so a huge `limit` or `offset` is a clear answer rather than a
number the database cannot hold (PostgreSQL's LIMIT and OFFSET are 64-bit)."""

from rest_framework.exceptions import ValidationError
from rest_framework.pagination import LimitOffsetPagination

MAX_OFFSET = 2**53  # past any table's length, and below every database's integer limits


class BoundedLimitOffsetPagination(LimitOffsetPagination):
    # No page-size cap a client would notice (the job page asks for a whole matrix at once): only the database's.
    max_limit = MAX_OFFSET

    def get_offset(self, request) -> int:
        offset = super().get_offset(request)
        if offset > MAX_OFFSET:
            raise ValidationError({self.offset_query_param: [f"Ensure this value is at most {MAX_OFFSET}."]})
        return offset
