from datetime import UTC, datetime, time, timedelta

from django import forms
from django.conf import settings
from django.utils import timezone

LIFETIMES = (30, 90, 365)
ON_A_DATE = "date"


class TokenForm(forms.Form):
    """The API tokens page: a name, and a lifetime in days or an expiry date, at most RACKPILOT_API_TOKEN_MAX_DAYS."""

    name = forms.CharField(max_length=100, help_text="What uses it, e.g. “nightly acceptance run”.")
    lifetime = forms.ChoiceField(choices=(), initial="90")
    # A text field taking an ISO date, as every page writes dates: a browser's date picker shows the browser's
    # locale (mm/dd/yyyy) and says nothing of the time zone.
    expires_on = forms.DateField(
        required=False,
        label="Expires on (UTC date)",
        input_formats=["%Y-%m-%d"],
        widget=forms.DateInput(
            format="%Y-%m-%d",
            attrs={"pattern": r"\d{4}-\d{2}-\d{2}", "placeholder": "YYYY-MM-DD", "inputmode": "numeric", "size": 10},
        ),
        help_text="With “on a date”: YYYY-MM-DD, a UTC date; the token works through that day.",
        error_messages={"invalid": "Write the date as YYYY-MM-DD, e.g. 2027-03-31."},
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.max_days = settings.RACKPILOT_API_TOKEN_MAX_DAYS
        days = [d for d in LIFETIMES if d <= self.max_days] or [self.max_days]
        self.fields["lifetime"].choices = [(str(d), f"{d} days") for d in days] + [(ON_A_DATE, "on a date")]
        self.fields["lifetime"].initial = str(days[min(1, len(days) - 1)])

    def clean(self):
        data = super().clean()
        lifetime, today = data.get("lifetime"), timezone.now().date()
        if lifetime == ON_A_DATE:
            day = data.get("expires_on")
            if day is None:
                self.add_error("expires_on", "Pick the last day the token works.")
            elif day < today:
                self.add_error("expires_on", "The date is in the past.")
            elif day > today + timedelta(days=self.max_days):
                self.add_error("expires_on", f"A token may live at most {self.max_days} days.")
            else:
                data["expires"] = datetime.combine(day + timedelta(days=1), time.min, tzinfo=UTC)
        elif lifetime:
            data["expires"] = timezone.now() + timedelta(days=int(lifetime))
        return data
