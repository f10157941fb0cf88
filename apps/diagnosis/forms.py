from django import forms

from apps.diagnosis import services


class TriageForm(forms.Form):
    """A log pasted or uploaded (one of the two), at most RACKPILOT_TRIAGE_MAX_BYTES."""

    text = forms.CharField(
        required=False, strip=False, widget=forms.Textarea(attrs={"rows": 14, "spellcheck": "false"})
    )
    file = forms.FileField(required=False)

    def clean(self):
        cleaned = super().clean()
        try:
            cleaned["source"], cleaned["log"] = services.read_submission(
                text=cleaned.get("text") or "", upload=cleaned.get("file"), limit=services.max_bytes()
            )
        except services.TriageInputError as error:
            self.add_error(error.field, error.message)
        return cleaned
