from django import forms


class ClearEventForm(forms.Form):
    reason = forms.CharField(max_length=300, strip=True, help_text="Why the event is cleared (kept in the audit log).")
