from django import forms
from django.core.validators import MaxValueValidator, MinValueValidator
from rest_framework import serializers

from apps.core.validators import name_validator
from apps.inventory.models import Rack
from apps.monitoring.choices import BmcProtocol, PolicyKind, PolicyScope
from apps.monitoring.models import CostPolicy, Slo
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


class CostPolicyForm(forms.Form):
    """A new low-load power policy: the scope, the thresholds and the lowered limit (checked against the scope's
    SKUs), as the API takes them."""

    name = forms.CharField(max_length=100, validators=[name_validator])
    scope = forms.ChoiceField(choices=PolicyScope.choices, initial=PolicyScope.CLUSTER)
    rack = forms.ModelChoiceField(queryset=Rack.objects.order_by("name"), required=False)
    service = forms.ModelChoiceField(queryset=InferenceService.objects.order_by("name"), required=False)
    utilisation_below = forms.FloatField(initial=30, help_text="Lower the limit below this mean GPU utilisation (%).")
    restore_above = forms.FloatField(required=False, help_text="Restore above this (%); empty: 25 points above.")
    window_minutes = forms.IntegerField(initial=30, help_text="Over this many minutes.")
    power_limit_w = forms.IntegerField(help_text="The lowered power limit (W), within the SKUs' range.")

    PARAMETERS = ("utilisation_below", "restore_above", "window_minutes", "power_limit_w")

    def clean_name(self):
        name = self.cleaned_data["name"]
        if CostPolicy.objects.filter(name=name).exists():
            raise forms.ValidationError("A cost policy with this name exists already.")
        return name

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        policy = CostPolicy(
            kind=PolicyKind.LOW_LOAD_POWER, scope=data["scope"], rack=data.get("rack"), service=data.get("service")
        )
        try:
            policy.clean()
        except forms.ValidationError as error:
            for field, messages in error.message_dict.items():
                self.add_error(field, messages)
            return data
        parameters = {name: data[name] for name in self.PARAMETERS if data.get(name) is not None}
        try:
            data["parameters"] = check_parameters(kind=policy.kind, parameters=parameters, nodes=policy.nodes())
        except serializers.ValidationError as error:
            for field, messages in error.detail.items():
                self.add_error(field if field in self.fields else None, [str(message) for message in messages])
        data["policy"] = policy
        return data


class StorageTieringForm(forms.Form):
    """A new storage-tiering policy: where to look, how old, how large, as the API takes them (checked against the
    node's volumes)."""

    prefix = "tiering"
    name = forms.CharField(max_length=100, validators=[name_validator])
    node = forms.CharField(max_length=253, help_text="The node that mounts both tiers (runs find, lsof and mv).")
    source_path = forms.CharField(max_length=500, help_text="A directory on its hot or warm tier volume.")
    age_days = forms.IntegerField(initial=7, help_text="Move files not read for this many days.")
    min_size_mb = forms.IntegerField(initial=0, help_text="Leave files smaller than this (MB).")
    max_files = forms.IntegerField(initial=1000, help_text="At most this many files per action.")

    PARAMETERS = ("node", "source_path", "age_days", "min_size_mb", "max_files")

    def clean_name(self):
        name = self.cleaned_data["name"]
        if CostPolicy.objects.filter(name=name).exists():
            raise forms.ValidationError("A cost policy with this name exists already.")
        return name

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        policy = CostPolicy(kind=PolicyKind.STORAGE_TIERING, scope=PolicyScope.CLUSTER)
        parameters = {name: data[name] for name in self.PARAMETERS}
        try:
            data["parameters"] = check_parameters(kind=policy.kind, parameters=parameters, nodes=policy.nodes())
        except serializers.ValidationError as error:
            for field, messages in error.detail.items():
                self.add_error(field if field in self.fields else None, [str(message) for message in messages])
        data["policy"] = policy
        return data
