"""The API's request parsers (settings.REST_FRAMEWORK's DEFAULT_PARSER_CLASSES): a module of its own, since DRF
reads that setting while rest_framework.views is being imported."""

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

MAX_JSON_DEPTH = 64  # far past any body the API takes (an inventory import nests 5 deep)


class BoundedJSONParser(JSONParser):
    """DRF's JSON parser, refusing a body nested deeper than MAX_JSON_DEPTH with a 400: validators, the audit log
    and the schema checks walk a body recursively, and one ~940 levels deep ended in a RecursionError (a 500)."""

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError(f"JSON parse error - nested deeper than {MAX_JSON_DEPTH} levels") from None
        if _depth(data) > MAX_JSON_DEPTH:
            raise ParseError(f"JSON parse error - nested deeper than {MAX_JSON_DEPTH} levels")
        return data


def _depth(data) -> int:
    """How deep lists and objects nest in a parsed JSON value, found without recursion."""
    deepest, pending = 0, [(data, 1)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, dict | list):
            deepest = max(deepest, depth)
            if depth > MAX_JSON_DEPTH:
                break
            pending.extend((child, depth + 1) for child in (value.values() if isinstance(value, dict) else value))
    return deepest
