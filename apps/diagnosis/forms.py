from django import forms
from django.template.defaultfilters import filesizeformat

from apps.diagnosis import services


class TriageForm(forms.Form):
    """A log pasted or uploaded (one of the two), at most RACKPILOT_TRIAGE_MAX_BYTES."""

    text = forms.CharField(
        required=False, strip=False, widget=forms.Textarea(attrs={"rows": 14, "spellcheck": "false"})
    )
    file = forms.FileField(required=False)

    def clean(self):
        cleaned = super().clean()
        text, upload = cleaned.get("text") or "", cleaned.get("file")
        limit = services.max_bytes()
        try:
            if upload is not None and text.strip():
                raise services.TriageInputError("Paste a log or upload a file, not both.", field="file")
            if upload is not None:
                if upload.size > limit:
                    raise services.TriageInputError(
                        f"{upload.name} is {filesizeformat(upload.size)}, over the limit of {filesizeformat(limit)}.",
                        field="file",
                    )
                cleaned["log"] = services.decode_log(data=upload.read(), source=upload.name, limit=limit)
                cleaned["source"] = upload.name
            else:
                cleaned["log"] = services.check_text(text=text, source="The pasted log", limit=limit)
                cleaned["source"] = "pasted log"
        except services.TriageInputError as error:
            self.add_error(error.field, error.message)
        return cleaned
