"""The dashboard's cards in a real browser: rows of even length at 1440 and 1920 px. Five a row left the sixth card,
"Allocated but idle GPU-hours", alone on a row of its own."""

from collections import Counter

import pytest

from apps.accounts.choices import Role

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_the_dashboard_cards_fill_their_rows(live_server_url, page_as):
    page = page_as(Role.VIEWER)
    for width in (1440, 1920):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{live_server_url}/")
        tops = page.eval_on_selector_all(
            ".dashboard-grid > *", "cards => cards.map(card => Math.round(card.getBoundingClientRect().top))"
        )
        rows = sorted(Counter(tops).items())
        assert len(tops) >= 6, tops
        counts = [count for _, count in rows]
        assert max(counts) - min(counts) <= 1, f"at {width} px the cards' rows hold {counts}"
        idle = page.eval_on_selector("#gpu-hours-panel", "card => Math.round(card.getBoundingClientRect().top)")
        assert Counter(tops)[idle] > 1, f"at {width} px 'Allocated but idle' sits alone"
