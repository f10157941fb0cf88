import json

from django import forms

from apps.inventory.models import Node, Rack, Tag
from apps.jobs.kinds import kind_choices
from apps.nodeexec.transports import TRANSPORT_NAMES, default_transport


class JobForm(forms.Form):
    """The "new job" page: a kind, the targets by node, rack or tag, and the kind's parameters as JSON."""

    kind = forms.ChoiceField(choices=())
    transport = forms.ChoiceField(choices=[(name, name) for name in TRANSPORT_NAMES])
    nodes = forms.ModelMultipleChoiceField(
        Node.objects.all(), to_field_name="hostname", required=False, widget=forms.SelectMultiple(attrs={"size": 10})
    )
    racks = forms.ModelMultipleChoiceField(
        Rack.objects.all(), to_field_name="name", required=False, widget=forms.SelectMultiple(attrs={"size": 5})
    )
    tags = forms.ModelMultipleChoiceField(
        Tag.objects.all(), to_field_name="slug", required=False, widget=forms.SelectMultiple(attrs={"size": 5})
    )
    parameters = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 5, "class": "mono"}),
        initial="{}",
        required=False,
        help_text="JSON object; leave {} for the kind's defaults.",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["kind"].choices = kind_choices()
        self.fields["transport"].initial = default_transport()

    def clean_parameters(self):
        raw = (self.cleaned_data.get("parameters") or "").strip() or "{}"
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as error:
            raise forms.ValidationError(f"Not JSON: {error.msg} (line {error.lineno}, column {error.colno}).") from None
        if not isinstance(value, dict):
            raise forms.ValidationError('Give a JSON object, e.g. {"seconds": 5}.')
        return value

    def clean(self):
        data = super().clean()
        if not (data.get("nodes") or data.get("racks") or data.get("tags")):
            raise forms.ValidationError("Pick nodes, racks or tags to run on.")
        return data
