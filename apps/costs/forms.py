"""The page's forms for cost policies: one per policy kind, built from the parameters the kind declares."""

from django import forms
from rest_framework import serializers
from rest_framework.fields import empty

from apps.core.validators import name_validator
from apps.costs.choices import PolicyKind, PolicyScope
from apps.costs.models import CostPolicy
from apps.costs.policies.base import POLICY_KINDS, policy_kind
from apps.costs.services import check_parameters
from apps.inventory.models import Rack
from apps.workloads.models import InferenceService

# How a kind's parameter (a DRF field) is asked for on the page; the kind's serializer still judges every value.
FORM_FIELDS = {serializers.FloatField: forms.FloatField, serializers.IntegerField: forms.IntegerField}


def parameter_field(parameter: serializers.Field, *, label: str) -> forms.Field:
    """The form field for one of a kind's parameters: its label (with its unit), type, bounds, default and help, never
    required by the form itself when the kind has a default (an empty field takes the kind's default)."""
    kind = next((form for drf, form in FORM_FIELDS.items() if isinstance(parameter, drf)), forms.CharField)
    options = {"label": label, "required": parameter.required, "help_text": parameter.help_text or ""}
    if parameter.default is not empty:
        options["initial"] = parameter.default
    for bound in ("min_value", "max_value") if kind is not forms.CharField else ("max_length",):
        if getattr(parameter, bound, None) is not None:
            options[bound] = getattr(parameter, bound)
    return kind(**options)


class CostPolicyForm(forms.Form):
    """A new cost policy of one kind: its name, the scopes the kind acts on, and one field per parameter the kind
    declares (apps/costs/policies). The kind's own check judges the values against the scope (the SKUs' power
    range, the service's nodes, the node's volumes), as the API's does; its errors land on the parameter's field."""

    name = forms.CharField(max_length=100, validators=[name_validator])
    scope = forms.ChoiceField(choices=PolicyScope.choices, initial=PolicyScope.CLUSTER)
    rack = forms.ModelChoiceField(queryset=Rack.objects.order_by("name"), required=False, empty_label="Choose a rack")
    service = forms.ModelChoiceField(
        queryset=InferenceService.objects.order_by("name"), required=False, empty_label="Choose a service"
    )

    def __init__(self, *args, kind: str, **kwargs):
        self.kind = policy_kind(kind)
        kwargs.setdefault("prefix", kind)
        super().__init__(*args, **kwargs)
        self.parameters = list(self.kind.parameters().fields.items())
        for name, parameter in self.parameters:
            self.fields[name] = parameter_field(parameter, label=self.kind.parameter_label(name))
        scopes = [value for value in PolicyScope.values if value in self.kind.scopes]
        self.fixed_scope = scopes[0] if len(scopes) == 1 else None  # a kind with one scope does not ask for it
        if self.fixed_scope:
            del self.fields["scope"]
        else:
            self.fields["scope"].choices = [(value, PolicyScope(value).label) for value in scopes]
        for scope, field in ((PolicyScope.RACK, "rack"), (PolicyScope.SERVICE, "service")):
            if scope not in scopes:
                del self.fields[field]
            elif self.fixed_scope == scope:
                self.fields[field].required = True

    @property
    def title(self) -> str:
        return PolicyKind(self.kind.name).label

    def clean_name(self):
        name = self.cleaned_data["name"]
        if CostPolicy.objects.filter(name=name).exists():
            raise forms.ValidationError("A cost policy with this name exists already.")
        return name

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        scope = self.fixed_scope or data["scope"]
        policy = CostPolicy(kind=self.kind.name, scope=scope, rack=data.get("rack"), service=data.get("service"))
        try:
            policy.clean()
        except forms.ValidationError as error:
            for field, messages in error.message_dict.items():
                self.add_error(field, messages)
            return data
        given = {name: data[name] for name, _ in self.parameters if data.get(name) not in (None, "")}
        try:
            data["parameters"] = check_parameters(
                kind=policy.kind, parameters=given, nodes=policy.nodes(), policy=policy
            )
        except serializers.ValidationError as error:
            for field, messages in error.detail.items():
                self.add_error(field if field in self.fields else None, [str(message) for message in messages])
        data["policy"] = policy
        return data


def cost_policy_forms(data=None, *, posted: str | None = None) -> list[CostPolicyForm]:
    """One form per policy kind, in the kinds' order; only the posted kind's is bound to `data`."""
    return [
        CostPolicyForm(data if kind == posted else None, kind=kind)
        for kind in PolicyKind.values
        if kind in POLICY_KINDS
    ]
