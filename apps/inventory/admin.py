"""Django admin for SSH access profiles (the private key can be set or removed, never read back) and PDUs."""

from django import forms
from django.contrib import admin

from apps.inventory.models import Pdu, SshAccess
from apps.inventory.models.access import check_private_key


class SshAccessForm(forms.ModelForm):
    private_key = forms.CharField(
        required=False,
        strip=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="Paste an unencrypted OpenSSH or PEM private key to set or replace it; leave empty to keep it.",
    )
    remove_private_key = forms.BooleanField(required=False, help_text="Remove the stored private key.")

    class Meta:
        model = SshAccess
        fields = [
            "site",
            "rack",
            "node",
            "user",
            "port",
            "sudo",
            "jump_host",
            "jump_port",
            "jump_user",
            "jump_host_keys",
        ]

    def clean_private_key(self) -> str:
        text = self.cleaned_data.get("private_key") or ""
        return check_private_key(text) if text.strip() else ""

    def save(self, commit=True):
        instance = super().save(commit=False)
        if self.cleaned_data.get("remove_private_key"):
            instance.set_private_key("")
        elif self.cleaned_data.get("private_key"):
            instance.set_private_key(self.cleaned_data["private_key"])
        if commit:
            instance.save()
        return instance


@admin.register(SshAccess)
class SshAccessAdmin(admin.ModelAdmin):
    form = SshAccessForm
    list_display = ["__str__", "user", "port", "private_key_state", "sudo", "jump_host"]
    list_filter = ["sudo"]
    list_select_related = ["site", "rack", "node"]
    readonly_fields = ["private_key_state"]

    @admin.display(description="private key")
    def private_key_state(self, obj: SshAccess) -> str:
        return "set" if obj.has_private_key else "not set"


@admin.register(Pdu)
class PduAdmin(admin.ModelAdmin):
    list_display = ["name", "rack", "feed", "model", "capacity_w", "outlet_count", "mounting"]
    list_filter = ["feed", "rack__site"]
    list_select_related = ["rack"]
    search_fields = ["name", "model", "rack__name"]
