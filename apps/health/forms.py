from django import forms

from apps.health.costs import RELIABILITY_WINDOWS


class ClearEventForm(forms.Form):
    reason = forms.CharField(max_length=300, strip=True, help_text="Why the event is cleared (kept in the audit log).")


class ReliabilityForm(forms.Form):
    window = forms.ChoiceField(choices=[(name, name) for name in RELIABILITY_WINDOWS], required=False)
