"""API tokens made on the portal's page: the secret shown once, hashed at rest, refused when expired or revoked,
revocable by their owner or an admin, audited without the secret, and DRF authtoken keys carried over."""

import importlib
import json
import logging
from datetime import timedelta

import pytest
from django.apps import apps as django_apps
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from apps.core.models import AuditEntry
from apps.tokens import services
from apps.tokens.models import ApiToken
from tests.factories import make_token

pytestmark = pytest.mark.django_db

NODES = "/api/nodes/"


def _api(secret: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    return client


def _create(page, **fields):
    return page.post(reverse("api-token-create"), {"name": "nightly run", "lifetime": "30", **fields})


def test_a_token_made_on_the_page_is_shown_once_and_authenticates(browser_as, operator, caplog):
    caplog.set_level(logging.DEBUG)
    page = browser_as(operator)
    assert 'href="/tokens/"' in page.get(reverse("dashboard")).content.decode()  # in the user's menu

    answer = _create(page)

    assert answer.status_code == 201
    assert "no-store" in answer["Cache-Control"]
    token = ApiToken.objects.get(user=operator)
    shown = answer.content.decode()
    secret = shown.split('aria-label="The new token\'s secret"')[0].rsplit('value="', 1)[1].split('"')[0]
    assert secret.startswith(token.prefix) and len(secret) > 40
    assert token.digest == services.digest_of(secret) and secret not in json.dumps(
        list(ApiToken.objects.values()), default=str
    )
    assert 29 <= (token.expires - timezone.now()).days <= 30
    assert _api(secret).get(NODES).status_code == 200
    token.refresh_from_db()
    assert token.last_used is not None

    later = page.get(reverse("api-tokens")).content.decode()
    assert secret not in later and token.prefix in later and "nightly run" in later
    assert secret not in json.dumps(list(AuditEntry.objects.values()), default=str)
    assert secret not in caplog.text


def test_an_expired_token_is_refused_with_a_401_saying_so(viewer):
    secret = make_token(viewer)
    past = timezone.now() - timedelta(days=2)
    ApiToken.objects.update(created=past - timedelta(days=30), expires=past)

    answer = _api(secret).get(NODES)

    assert answer.status_code == 401
    assert answer["WWW-Authenticate"] == "Token"
    assert "expired" in answer.json()["detail"]


def test_a_revoked_token_is_refused_with_a_401_saying_so(browser_as, viewer):
    secret = make_token(viewer)
    assert _api(secret).get(NODES).status_code == 200
    token = ApiToken.objects.get()

    browser_as(viewer).post(reverse("api-token-revoke", args=[token.public_id]))

    answer = _api(secret).get(NODES)
    assert answer.status_code == 401
    assert "revoked" in answer.json()["detail"]
    token.refresh_from_db()
    assert token.revoked and token.revoked_by == viewer


def test_an_unknown_or_missing_token_is_401(api_client):
    assert _api("rpt_not-a-token").get(NODES).json()["detail"] == "Invalid token."
    assert api_client.get(NODES).status_code == 401


def test_only_the_owner_or_an_admin_may_see_and_revoke_a_token(browser_as, client, viewer, operator, admin):
    secret = make_token(viewer, name="viewer's own")
    token = ApiToken.objects.get()

    page = browser_as(operator)
    assert "viewer&#x27;s own" not in page.get(reverse("api-tokens")).content.decode()
    assert page.post(reverse("api-token-revoke", args=[token.public_id])).status_code == 404
    assert _api(secret).get(NODES).status_code == 200
    client.logout()

    page = browser_as(admin)
    listed = page.get(reverse("api-tokens")).content.decode()
    assert "viewer&#x27;s own" in listed and "<th>Owner</th>" in listed
    assert page.post(reverse("api-token-revoke", args=[token.public_id])).status_code == 302
    assert _api(secret).get(NODES).status_code == 401
    client.logout()
    assert client.post(reverse("api-token-revoke", args=[token.public_id])).status_code == 302  # to the login page


def test_creation_and_revocation_are_audited_without_the_secret(browser_as, operator):
    page = browser_as(operator)
    secret = _create(page, name="ci").content.decode().split('readonly value="')[1].split('"')[0]
    token = ApiToken.objects.get()
    page.post(reverse("api-token-revoke", args=[token.public_id]))

    entries = AuditEntry.objects.filter(object_type="tokens.apitoken", object_id=str(token.public_id))
    assert sorted(entries.values_list("action", "actor_name")) == [("create", "operator"), ("delete", "operator")]
    dumped = json.dumps(list(AuditEntry.objects.values()), default=str)
    assert secret not in dumped and token.digest not in dumped


def test_last_used_is_written_at_most_once_a_minute(viewer, django_assert_num_queries):
    secret = make_token(viewer)
    services.authenticate_secret(secret)
    first = ApiToken.objects.get().last_used

    with django_assert_num_queries(1):  # the lookup, no write
        services.authenticate_secret(secret)
    assert ApiToken.objects.get().last_used == first

    ApiToken.objects.update(last_used=first - timedelta(minutes=2))
    with django_assert_num_queries(2):
        services.authenticate_secret(secret)
    assert ApiToken.objects.get().last_used > first - timedelta(minutes=1)


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"name": ""}, "name", "required"),
        ({"lifetime": "999"}, "lifetime", "valid choice"),
        ({"lifetime": "date", "expires_on": ""}, "expires_on", "last day"),
        ({"lifetime": "date", "expires_on": "2001-01-01"}, "expires_on", "past"),
        ({"lifetime": "date", "expires_on": "03/31/2027"}, "expires_on", "YYYY-MM-DD"),  # a locale's date: refused
    ],
)
def test_bad_input_is_a_form_error_and_makes_no_token(browser_as, viewer, fields, field, message):
    answer = _create(browser_as(viewer), **fields)
    assert answer.status_code == 400
    assert message in " ".join(answer.context["form"].errors[field])
    assert not ApiToken.objects.exists()


def test_the_longest_lifetime_is_a_setting(browser_as, viewer, settings):
    settings.RACKPILOT_API_TOKEN_MAX_DAYS = 60
    page = browser_as(viewer)
    too_late = (timezone.now() + timedelta(days=61)).date().isoformat()

    assert _create(page, lifetime="90").status_code == 400
    answer = _create(page, lifetime="date", expires_on=too_late)
    assert "at most 60 days" in " ".join(answer.context["form"].errors["expires_on"])
    assert not ApiToken.objects.exists()
    assert _create(page, lifetime="30").status_code == 201


def test_the_expiry_date_field_takes_an_iso_utc_date_not_the_browsers_locale(browser_as, viewer):
    """A date picker showed mm/dd/yyyy (the browser's locale) on a portal that writes every date as 2026-12-05, and did
    not say which day's midnight: the field is ISO text and says UTC."""
    html = browser_as(viewer).get("/tokens/").content.decode()
    field = html.split('name="expires_on"')[0].rsplit("<input", 1)[1] + html.split('name="expires_on"')[1].split(">")[0]
    assert 'type="text"' in field and 'placeholder="YYYY-MM-DD"' in field and r'pattern="\d{4}-\d{2}-\d{2}"' in field
    assert "Expires on (UTC date)" in html


def test_a_date_makes_a_token_that_works_through_that_day(browser_as, viewer):
    day = (timezone.now() + timedelta(days=10)).date()
    assert _create(browser_as(viewer), lifetime="date", expires_on=day.isoformat()).status_code == 201
    expires = ApiToken.objects.get().expires
    assert expires.date() == day + timedelta(days=1) and (expires.hour, expires.minute) == (0, 0)


@pytest.mark.wirings  # a data migration, on each database
def test_drf_authtoken_keys_are_hashed_into_api_tokens_and_keep_working(viewer):
    key = Token.objects.create(user=viewer).key
    migration = importlib.import_module("apps.tokens.migrations.0002_hash_authtoken_keys")

    migration.hash_authtoken_keys(django_apps, None)

    assert not Token.objects.exists()  # no key left in clear
    token = ApiToken.objects.get(user=viewer)
    assert token.prefix == key[:8] and token.digest == services.digest_of(key)
    assert _api(key).get(NODES).status_code == 200


def test_the_schema_documents_the_token_header(api_as, viewer):
    schema = api_as(viewer).get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    scheme = schema["components"]["securitySchemes"]["tokenAuth"]
    assert scheme["name"] == "Authorization" and "/tokens/" in scheme["description"]


def test_the_django_admin_lists_and_revokes_tokens_and_no_longer_makes_clear_keys(client, viewer, django_user_model):
    secret = make_token(viewer, name="from admin")
    superuser = django_user_model.objects.create_superuser("root", password="correct-horse-battery")
    client.force_login(superuser)
    assert "from admin" in client.get(reverse("admin:tokens_apitoken_changelist")).content.decode()
    assert "authtoken" not in client.get(reverse("admin:index")).content.decode()

    token = ApiToken.objects.get()
    client.post(reverse("admin:tokens_apitoken_changelist"), {"action": "revoke", "_selected_action": [token.pk]})

    token.refresh_from_db()
    assert token.revoked_by == superuser
    assert _api(secret).get(NODES).status_code == 401


def test_the_page_needs_a_login_and_viewing_it_writes_nothing(client, browser_as, viewer):
    assert client.get(reverse("api-tokens")).status_code == 302
    make_token(viewer)
    page = browser_as(viewer)
    with CaptureQueriesContext(connection) as queries:
        assert page.get(reverse("api-tokens")).status_code == 200
    assert not [q["sql"] for q in queries if q["sql"].lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE"))]


def test_the_new_secret_has_a_copy_button_and_the_answer_is_not_posted_again(browser_as, operator):
    shown = _create(browser_as(operator)).content.decode()
    assert 'id="copy-secret"' in shown
    assert 'history.replaceState(null, "", "/tokens/")' in shown  # a reload asks for the list, not the POST
    listed = browser_as(operator).get(reverse("api-tokens")).content.decode()
    revoke = listed.split('/revoke/"')[1].split("</form>")[0]
    assert ">Revoke</button>" in revoke and 'class="danger small"' in revoke  # not the top bar's grey link
