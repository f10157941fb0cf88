from django import forms
from django.core.validators import MaxValueValidator, MinValueValidator

from apps.inventory.models import Rack
from apps.monitoring.bmc.logins import validate_bmc_address, validate_bmc_user, validate_password
from apps.monitoring.choices import BmcProtocol
from apps.monitoring.models import Slo


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

    # A rack's name typed (the page offers the racks in a datalist): a select of a fleet's hundreds of racks cost the
    # SLOs page ~80 ms to render at 258 racks, and the operator a long scroll.
    rack = forms.ModelChoiceField(
        queryset=Rack.objects.order_by("name"),
        to_field_name="name",
        required=False,
        widget=forms.TextInput(attrs={"list": "slo-racks", "placeholder": "No rack", "autocomplete": "off"}),
        error_messages={"invalid_choice": "No rack of that name."},
    )

    # What an empty choice says, in words (Django's is "---------"); the scope picked names which of the three it is.
    EMPTY_CHOICES = {
        "objective": "Choose an objective",
        "scope": "Choose a scope",
        "service": "No service",
        "training_job": "No training job",
    }

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name, words in self.EMPTY_CHOICES.items():
            field = self.fields[name]
            if isinstance(field, forms.ModelChoiceField):
                field.empty_label = words
            else:
                field.choices = [("", words), *[(value, label) for value, label in field.choices if value != ""]]

    def rack_names(self):
        """The racks' names, for the rack field's datalist."""
        return self.fields["rack"].queryset.values_list("name", flat=True)
