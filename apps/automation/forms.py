"""The automation pages' forms. They check shapes; services check meaning (the kind's parameters, the targets, the
crontab, the webhook address) and their errors land on the fields they name (core.forms.add_service_errors)."""

import json

from django import forms

from apps.automation.choices import SUBSCRIBABLE_EVENTS, Channel, Timing
from apps.automation.models import JobTemplate
from apps.inventory.choices import NodeRole
from apps.inventory.models import Node, Rack, Tag
from apps.jobs.kinds import kind_choices
from apps.nodeexec.transports import TRANSPORT_NAMES


class TemplateForm(forms.Form):
    name = forms.CharField(max_length=100)
    description = forms.CharField(max_length=300, required=False)
    kind = forms.ChoiceField(choices=())
    transport = forms.ChoiceField(
        choices=[("", "default")] + [(name, name) for name in TRANSPORT_NAMES], required=False
    )
    nodes = forms.ModelMultipleChoiceField(
        Node.objects.all(), to_field_name="hostname", required=False, widget=forms.SelectMultiple(attrs={"size": 8})
    )
    racks = forms.ModelMultipleChoiceField(
        Rack.objects.all(), to_field_name="name", required=False, widget=forms.SelectMultiple(attrs={"size": 4})
    )
    tags = forms.ModelMultipleChoiceField(
        Tag.objects.all(), to_field_name="slug", required=False, widget=forms.SelectMultiple(attrs={"size": 4})
    )
    role = forms.ChoiceField(choices=[("", "any")] + list(NodeRole.choices), required=False)
    only_idle = forms.BooleanField(
        required=False, label="Only idle nodes", help_text=JobTemplate._meta.get_field("only_idle").help_text
    )
    parameters = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 5, "class": "mono"}),
        initial="{}",
        required=False,
        help_text="JSON object, checked by the kind; {} for its defaults.",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["kind"].choices = kind_choices()

    def clean_parameters(self):
        raw = (self.cleaned_data.get("parameters") or "").strip() or "{}"
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as error:
            raise forms.ValidationError(f"Not JSON: {error.msg} (line {error.lineno}, column {error.colno}).") from None
        if not isinstance(value, dict):
            raise forms.ValidationError('Give a JSON object, e.g. {"seconds": 5}.')
        return value

    def passed_fields(self, refused: set[str]) -> dict:
        """What save_template judges, of the fields whose shape passed (None: refused, not judged)."""
        data = self.cleaned_data
        return {
            "name": data.get("name"),
            "kind": data.get("kind"),
            "transport": data.get("transport") if "transport" not in refused else None,
            "targets": self._targets() if not refused & {"nodes", "racks", "tags", "role"} else None,
            "parameters": data.get("parameters"),
        }

    def _targets(self) -> dict:
        data = self.cleaned_data
        return {
            "nodes": [n.hostname for n in data["nodes"]],
            "racks": [r.name for r in data["racks"]],
            "tags": [t.slug for t in data["tags"]],
            "role": data["role"],
        }

    def service_fields(self) -> dict:
        data = self.cleaned_data
        return {
            "name": data["name"],
            "description": data["description"],
            "kind": data["kind"],
            "transport": data["transport"],
            "targets": self._targets(),
            "parameters": data["parameters"],
            "only_idle": data["only_idle"],
        }

    @classmethod
    def initial_of(cls, template: JobTemplate) -> dict:
        targets = template.targets or {}
        return {
            "name": template.name,
            "description": template.description,
            "kind": template.kind,
            "transport": template.transport,
            "nodes": targets.get("nodes", []),
            "racks": targets.get("racks", []),
            "tags": targets.get("tags", []),
            "role": targets.get("role", ""),
            "only_idle": template.only_idle,
            "parameters": json.dumps(template.parameters, indent=2, sort_keys=True),
        }


class ScheduleForm(forms.Form):
    name = forms.CharField(max_length=100)
    template = forms.ModelChoiceField(JobTemplate.objects.all(), to_field_name="public_id")
    timing = forms.ChoiceField(choices=Timing.choices)
    minute = forms.CharField(max_length=60, initial="0")
    hour = forms.CharField(max_length=60, initial="2")
    day_of_month = forms.CharField(max_length=60, initial="*")
    month_of_year = forms.CharField(max_length=60, initial="*")
    day_of_week = forms.CharField(max_length=60, initial="*", help_text="0 or sun = Sunday; mon-fri works.")
    every_minutes = forms.IntegerField(min_value=1, max_value=525600, required=False, label="Every (minutes)")
    enabled = forms.BooleanField(required=False, initial=True)


class SubscriptionForm(forms.Form):
    name = forms.CharField(max_length=100)
    channel = forms.ChoiceField(choices=Channel.choices)
    events = forms.MultipleChoiceField(choices=SUBSCRIBABLE_EVENTS, widget=forms.CheckboxSelectMultiple)
    url = forms.CharField(max_length=500, required=False, label="Webhook URL")
    secret = forms.CharField(
        max_length=200,
        required=False,
        widget=forms.PasswordInput(render_value=False),
        label="Shared secret",
        help_text="Signs each request (HMAC-SHA256); kept encrypted, never shown. Blank keeps the stored one.",
    )
    recipients = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 2}), help_text="E-mail: one address per line."
    )
    enabled = forms.BooleanField(required=False, initial=True)
