from apps.core.audit import audit_context
from apps.core.choices import ChangeSource
from apps.core.reads import ReadScope


class AuditContextMiddleware:
    """Attributes changes made while serving a request to its user, as API or UI changes."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        source = ChangeSource.API if request.path.startswith("/api/") else ChangeSource.UI
        with audit_context(source=source, request=request):
            return self.get_response(request)


class ReadScopeMiddleware:
    """Lets a read request work out what it asks for many times once (apps.core.reads)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        with ReadScope(request.method):
            return self.get_response(request)
