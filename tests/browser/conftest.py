import os

import pytest
from django.db import connections

from apps.accounts.choices import Role
from tests import factories
from tests.browser.session import PASSWORD, log_in
from tests.live_server import need

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture
def browser_page(monkeypatch):
    # Playwright's sync API keeps an event loop in this thread; the test's own ORM calls are still plain sync code.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    need(os.path.exists(CHROMIUM), "needs Debian's chromium (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        need(False, "needs the playwright Python package (pip install -e .[test])")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page()
        yield page
        # The test's ORM calls ran while Playwright's loop was running, so their connection is kept per context, not
        # per thread: close it before that loop ends, or PostgreSQL refuses to drop the test database at the end.
        connections.close_all()
        browser.close()


@pytest.fixture
def page_as(live_server_url, browser_page):
    """page_as(role, username) -> the browser page logged in through the portal's login form as a new user of that
    role; a step may take up to 30 s (a loaded CI run is slow to render, and the tests show layout, not speed)."""

    def log_in_as(role: str = Role.VIEWER, username: str = "watcher"):
        factories.make_user(role=role, username=username, password=PASSWORD)
        browser_page.set_default_timeout(30000)
        log_in(browser_page, live_server_url, username)
        return browser_page

    return log_in_as
