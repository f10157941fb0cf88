"""{{ moment|ago }}: how long ago, in words a reader trusts."""

import datetime as dt

from django.utils import timezone

from apps.core.templatetags.when import ago


def test_under_a_minute_is_just_now_not_zero_minutes(clock):
    now = timezone.now()
    assert ago(now - dt.timedelta(seconds=20)) == "just now"
    assert ago(now - dt.timedelta(minutes=3, seconds=5)) == "3\xa0minutes ago"
    assert ago(None) == "—"
