import os

import pytest
from django.db import connections

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
