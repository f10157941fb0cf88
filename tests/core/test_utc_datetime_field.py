"""The one date-time text field of the pages' forms (the audit log's since/until, a maintenance window's start and
end): YYYY-MM-DD HH:MM read in UTC, with or without seconds, a "T" or a "Z"; anything else an error naming the field."""

import datetime as dt

import pytest
from django import forms

from apps.core.forms import UtcDateTimeField


class WhenForm(forms.Form):
    starts = UtcDateTimeField(label="Starts (UTC)")


@pytest.mark.parametrize(
    "text", ["2027-03-31 14:30", "2027-03-31 14:30:00", "2027-03-31T14:30", "2027-03-31T14:30:00Z"]
)
def test_a_time_is_read_in_utc_with_or_without_seconds_and_a_t(text, settings):
    settings.TIME_ZONE = "Europe/Berlin"  # the portal's zone is not the one typed: the label says UTC
    form = WhenForm({"starts": f"  {text} "})
    assert form.is_valid(), form.errors
    assert form.cleaned_data["starts"] == dt.datetime(2027, 3, 31, 14, 30, tzinfo=dt.UTC)


@pytest.mark.parametrize("text", ["03/31/2027 02:30 PM", "2027-03-31", "2027-03-31 25:00", "2027-03-31T14:30+02:00"])
def test_anything_else_is_an_error_naming_the_field(text):
    form = WhenForm({"starts": text})
    assert not form.is_valid()
    assert form.errors["starts"] == ["Write a UTC time as YYYY-MM-DD HH:MM, e.g. 2027-03-31 14:30."]


def test_a_stored_time_is_shown_in_utc_as_it_is_typed(settings):
    settings.TIME_ZONE = "Europe/Berlin"
    html = str(WhenForm(initial={"starts": dt.datetime(2027, 3, 31, 14, 30, tzinfo=dt.UTC)})["starts"])
    assert 'value="2027-03-31 14:30"' in html and 'placeholder="YYYY-MM-DD HH:MM"' in html
    assert "datetime-local" not in html
