"""Error answers: JSON under /api/ whatever raised them (a path that matches no route, a crash), branded pages
elsewhere. DRF's own views already answer JSON; these cover what Django answers before or after DRF."""

from django.http import HttpResponseServerError, JsonResponse
from django.shortcuts import render
from django.template import loader

API_PREFIX = "/api/"


def _is_api(request) -> bool:
    return request.path.startswith(API_PREFIX)


def bad_request(request, exception=None):
    if _is_api(request):
        return JsonResponse({"detail": "Bad request."}, status=400)
    return render(request, "errors/error.html", {"code": 400, "title": "Bad request"}, status=400)


def permission_denied(request, exception=None):
    if _is_api(request):
        return JsonResponse({"detail": "You do not have permission to perform this action."}, status=403)
    text = "Your role does not allow this. An admin can change your role."
    return render(request, "errors/error.html", {"code": 403, "title": "Not allowed", "text": text}, status=403)


def page_not_found(request, exception=None):
    if _is_api(request):
        return JsonResponse({"detail": "Not found."}, status=404)
    text = "Nothing here: the address may be mistyped, or the object was deleted."
    return render(request, "errors/error.html", {"code": 404, "title": "Not found", "text": text}, status=404)


def server_error(request):
    if _is_api(request):
        return JsonResponse({"detail": "Server error: the portal's log has the details."}, status=500)
    # Rendered without the request: whatever broke may be what a context processor needs.
    return HttpResponseServerError(loader.get_template("errors/500.html").render())
