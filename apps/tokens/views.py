"""The API tokens page: create (the secret shown once), list, revoke. Admins also see and revoke everyone's."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from apps.tokens import services
from apps.tokens.forms import TokenForm
from apps.tokens.models import ApiToken


def _page(request, form: TokenForm, *, secret: str = "", created: ApiToken | None = None, status: int = 200):
    tokens = ApiToken.objects.visible_to(request.user).select_related("user", "revoked_by")
    context = {"form": form, "tokens": tokens, "secret": secret, "created": created}
    return render(request, "tokens/token_list.html", context, status=status)


@login_required
def token_list(request):
    return _page(request, TokenForm())


@never_cache  # the one answer that carries the secret must not be kept by a browser or proxy
@login_required
@require_POST
def token_create(request):
    form = TokenForm(request.POST)
    if not form.is_valid():
        return _page(request, form, status=400)
    try:
        token, secret = services.create_token(
            user=request.user, name=form.cleaned_data["name"], expires=form.cleaned_data["expires"]
        )
    except ValueError as error:
        form.add_error(None, str(error))
        return _page(request, form, status=400)
    return _page(request, TokenForm(), secret=secret, created=token, status=201)


@login_required
@require_POST
def token_revoke(request, public_id):
    token = get_object_or_404(ApiToken.objects.visible_to(request.user).select_related("user"), public_id=public_id)
    if services.revoke_token(token=token, by=request.user):
        messages.success(request, f"Revoked the token {token.prefix}… “{token.name}”.")
    else:
        messages.info(request, f"The token {token.prefix}… was already revoked.")
    return redirect("api-tokens")
