"""The API tokens page in a real browser: the new secret is shown once with a Copy button, and reloading the page
after making a token shows the list without posting the form again (no second token)."""

import pytest

from apps.accounts.choices import Role
from apps.tokens.models import ApiToken
from tests import factories
from tests.browser.session import log_in

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_a_reload_after_making_a_token_does_not_make_another(live_server_url, browser_page):
    factories.make_user(role=Role.OPERATOR, username="op", password="correct-horse-battery")
    page = browser_page
    page.set_default_timeout(30000)
    log_in(page, live_server_url, "op")
    page.goto(f"{live_server_url}/tokens/")
    page.fill("#token-form input[name=name]", "nightly")
    page.click("#token-form button[type=submit]")
    page.wait_for_selector("#new-secret")
    secret = page.input_value("#secret")
    page.click("#copy-secret")
    page.wait_for_function("document.getElementById('copy-state')?.textContent.length > 0")

    posts = []
    page.on("request", lambda request: posts.append(request.url) if request.method == "POST" else None)
    page.reload()
    page.wait_for_selector("#tokens")
    assert posts == [] and ApiToken.objects.count() == 1
    assert page.url.endswith("/tokens/") and page.locator("#new-secret").count() == 0
    assert secret not in page.content()
