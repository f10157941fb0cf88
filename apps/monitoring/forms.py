from django import forms
from django.core.validators import MaxValueValidator, MinValueValidator
from rest_framework import serializers
from rest_framework.fields import empty

from apps.core.validators import name_validator
from apps.inventory.models import Rack
from apps.monitoring.choices import BmcProtocol, PolicyKind, PolicyScope
from apps.monitoring.models import CostPolicy, Slo
from apps.monitoring.policies.base import POLICY_KINDS, policy_kind
from apps.monitoring.policies.services import check_parameters
from apps.monitoring.validation import validate_bmc_address, validate_bmc_user, validate_password
from apps.workloads.models import InferenceService


class BmcForm(forms.Form):
    """A node's BMC settings. The password is write-only: the form never shows it, and empty keeps the stored one."""

    address = forms.CharField(
        max_length=253,
        validators=[validate_bmc_address],
        help_text="The BMC's host name or IP address (management network).",
    )
    protocol = forms.ChoiceField(choices=BmcProtocol.choices)
    port = forms.IntegerField(
        required=False,
        validators=[MinValueValidator(1), MaxValueValidator(65535)],
        help_text="Empty: 623 for IPMI, 443 for Redfish.",
    )
    user = forms.CharField(max_length=64, validators=[validate_bmc_user])
    password = forms.CharField(
        required=False,
        strip=False,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Stored encrypted and never shown. Leave empty to keep the stored one.",
    )
    clear_password = forms.BooleanField(required=False, label="Forget the stored password")
    verify_tls = forms.BooleanField(required=False, initial=True, label="Verify the BMC's TLS certificate (Redfish)")

    def clean(self):
        data = super().clean()
        password, protocol = data.get("password") or "", data.get("protocol")
        if password and protocol:
            try:
                validate_password(password, protocol)
            except forms.ValidationError as error:
                self.add_error("password", error)
        if password and data.get("clear_password"):
            self.add_error("clear_password", "Give a new password or forget the stored one, not both.")
        return data


class SloForm(forms.ModelForm):
    """A new SLO: the model's clean() names the field that does not fit the objective."""

    class Meta:
        model = Slo
        fields = ["name", "objective", "scope", "service", "training_job", "rack", "target", "compliance"]


# How a kind's parameter (a DRF field) is asked for on the page; the kind's serializer still judges every value.
FORM_FIELDS = {serializers.FloatField: forms.FloatField, serializers.IntegerField: forms.IntegerField}


def parameter_field(parameter: serializers.Field) -> forms.Field:
    """The form field for one of a kind's parameters: its type, bounds, default and help, never required by the form
    itself when the kind has a default (an empty field takes the kind's default)."""
    kind = next((form for drf, form in FORM_FIELDS.items() if isinstance(parameter, drf)), forms.CharField)
    options = {"required": parameter.required, "help_text": parameter.help_text or ""}
    if parameter.default is not empty:
        options["initial"] = parameter.default
    for bound in ("min_value", "max_value") if kind is not forms.CharField else ("max_length",):
        if getattr(parameter, bound, None) is not None:
            options[bound] = getattr(parameter, bound)
    return kind(**options)


class CostPolicyForm(forms.Form):
    """A new cost policy of one kind: its name, the scopes the kind acts on, and one field per parameter the kind
    declares (apps/monitoring/policies). The kind's own check judges the values against the scope (the SKUs' power
    range, the service's nodes, the node's volumes), as the API's does; its errors land on the parameter's field."""

    name = forms.CharField(max_length=100, validators=[name_validator])
    scope = forms.ChoiceField(choices=PolicyScope.choices, initial=PolicyScope.CLUSTER)
    rack = forms.ModelChoiceField(queryset=Rack.objects.order_by("name"), required=False)
    service = forms.ModelChoiceField(queryset=InferenceService.objects.order_by("name"), required=False)

    def __init__(self, *args, kind: str, **kwargs):
        self.kind = policy_kind(kind)
        kwargs.setdefault("prefix", kind)
        super().__init__(*args, **kwargs)
        self.parameters = list(self.kind.parameters().fields.items())
        for name, parameter in self.parameters:
            self.fields[name] = parameter_field(parameter)
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
