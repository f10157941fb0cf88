"""The remediation pages' forms: a repair's part and note; a maintenance window; the back-test form, a candidate
policy (a change to one, or a new one) back-tested before it is saved: a policy saved "on" through it must carry a
back-test of those very fields from the last day."""

from django import forms
from django.core import signing

from apps.core.api import errors_beyond_shape
from apps.core.forms import UtcDateTimeField
from apps.inventory.models import Node, Rack
from apps.remediation import windows
from apps.remediation.api.serializers import BACKTEST_WINDOWS, kind_pattern_validator
from apps.remediation.choices import Mode, PartType
from apps.remediation.models import MaintenanceWindow, RemediationPolicy

BACKTEST_FRESH_S = 86_400  # a back-test older than this no longer lets a policy go live
SALT = "rackpilot.remediation.backtest"
POLICY_FIELDS = [
    "name", "kind_pattern", "min_severity", "action", "mode", "enabled", "breaker_max_nodes", "breaker_max_percent",
    "breaker_window_minutes", "max_attempts", "canary_racks",
]  # fmt: skip


class BacktestForm(forms.ModelForm):
    window = forms.ChoiceField(choices=[(name, name) for name in BACKTEST_WINDOWS], initial="7d")
    campaign = forms.BooleanField(required=False, help_text="Also replay a simulated fault campaign on the twin.")
    seed = forms.IntegerField(min_value=0, max_value=2**31 - 1, initial=1, help_text="The campaign's seed.")
    backtested = forms.CharField(required=False, widget=forms.HiddenInput)

    class Meta:
        model = RemediationPolicy
        fields = POLICY_FIELDS

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["kind_pattern"].validators.append(kind_pattern_validator)
        self.fields["canary_racks"].queryset = Rack.objects.filter(nodes__isnull=False).distinct().order_by("name")
        self.fields["canary_racks"].required = False

    def fingerprint(self) -> str:
        """The candidate's fields, signed: what a back-test shown for them hands the Save button."""
        return signing.dumps(self._canonical(), salt=SALT)

    def _canonical(self) -> list:
        data = self.cleaned_data
        return [
            sorted(rack.pk for rack in data[name]) if name == "canary_racks" else str(data[name])
            for name in POLICY_FIELDS
        ]

    def check_backtested(self) -> bool:
        """Going live ("on") needs a back-test of exactly these fields in the last day; adds the error if not."""
        if self.cleaned_data.get("mode") != Mode.ON:
            return True
        try:
            ok = signing.loads(self.cleaned_data.get("backtested") or "", salt=SALT, max_age=BACKTEST_FRESH_S)
        except signing.BadSignature:
            ok = None
        if ok != self._canonical():
            self.add_error("mode", "Back-test these fields before the policy goes on (a back-test counts for a day).")
            return False
        return True


class PartForm(forms.Form):
    component_type = forms.ChoiceField(choices=PartType.choices)
    gpu_index = forms.IntegerField(required=False, min_value=0, max_value=15, help_text="For a GPU: its index.")
    label = forms.CharField(required=False, max_length=200, help_text="Other parts: the slot (NIC ib0, PSU 2).")
    old_serial = forms.CharField(required=False, max_length=64, help_text="Empty for a GPU: the inventory's.")
    new_serial = forms.CharField(max_length=64)
    note = forms.CharField(required=False, max_length=300)


class NoteForm(forms.Form):
    note = forms.CharField(required=False, max_length=1000)


class WindowForm(forms.ModelForm):
    """A maintenance window on a rack or a node (the rules: apps/remediation/windows.py)."""

    rack = forms.ModelChoiceField(
        queryset=Rack.objects.order_by("name"), to_field_name="public_id", required=False, empty_label="Choose a rack"
    )
    node = forms.ModelChoiceField(
        queryset=Node.objects.order_by("hostname"), to_field_name="public_id", required=False, empty_label="or a node"
    )
    starts = UtcDateTimeField(label="Starts (UTC)")
    ends = UtcDateTimeField(label="Ends (UTC)")

    class Meta:
        model = MaintenanceWindow
        fields = ["rack", "node", "starts", "ends", "reason"]

    def clean(self):
        data = super().clean()
        # The window's rules on the fields whose shape passed (a rack refused is not "no rack").
        for field, messages in errors_beyond_shape(self.errors, data, _window_errors).items():
            self.add_error(field, messages)
        return data


def _window_errors(data: dict, refused: set[str]) -> dict:
    return windows.problems(
        rack=data.get("rack"),
        node=data.get("node"),
        starts=data.get("starts"),
        ends=data.get("ends"),
        subject_refused=bool(refused & {"rack", "node"}),
    )
