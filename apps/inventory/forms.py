from django import forms

from apps.core.forms import UtcDateTimeField
from apps.inventory.choices import NodeStatus
from apps.inventory.models import Node, Rack, Tag
from apps.inventory.transfer import guess_format

TRANSFER_FORMATS = [("json", "JSON (whole inventory)"), ("yaml", "YAML (whole inventory)"), ("csv", "CSV (nodes only)")]


class NodeForm(forms.ModelForm):
    class Meta:
        model = Node
        fields = [
            "hostname",
            "role",
            "status",
            "rack",
            "u_position",
            "u_height",
            "management_ip",
            "ssh_port",
            "transport",
            "bmc_address",
            "gpu_sku",
            "expected_gpu_count",
            "numa_nodes",
            "tags",
            "comments",
        ]
        widgets = {"comments": forms.Textarea(attrs={"rows": 3})}


class ImportForm(forms.Form):
    file = forms.FileField(help_text="JSON or YAML of the whole inventory, or CSV of nodes.")
    fmt = forms.ChoiceField(label="Format", choices=[("", "From the file name")] + TRANSFER_FORMATS, required=False)

    def clean(self):
        cleaned = super().clean()
        upload = cleaned.get("file")
        if upload and not cleaned.get("fmt"):
            guessed = guess_format(upload.name)
            if guessed is None:
                message = "Choose a format: the file name does not end in .json, .yaml or .csv."
                raise forms.ValidationError({"fmt": message})
            cleaned["fmt"] = guessed
        return cleaned


class DrainForm(forms.Form):
    reason = forms.CharField(max_length=200, help_text="Why the node is taken out of new work.")
    since = UtcDateTimeField(label="Since (UTC)", required=False, help_text="YYYY-MM-DD HH:MM, in UTC. Empty: now.")
    until = UtcDateTimeField(
        label="Until (UTC)", required=False, help_text="YYYY-MM-DD HH:MM, in UTC. Optional: when it should come back."
    )


class BulkNodeForm(forms.Form):
    """What to do to the nodes ticked in the node list. Drain and undrain need an operator, edits an admin."""

    ACTIONS = [("drain", "Drain"), ("undrain", "Undrain"), ("edit", "Edit")]

    nodes = forms.ModelMultipleChoiceField(queryset=Node.objects.all(), to_field_name="public_id")
    action = forms.ChoiceField(choices=ACTIONS)
    reason = forms.CharField(max_length=200, required=False)
    until = UtcDateTimeField(label="Until (UTC)", required=False)
    status = forms.ChoiceField(choices=[("", "(unchanged)"), *NodeStatus.choices], required=False)
    rack = forms.ModelChoiceField(queryset=Rack.objects.all(), required=False, empty_label="(unchanged)")
    add_tag = forms.ModelChoiceField(queryset=Tag.objects.all(), required=False, empty_label="(none)")
    remove_tag = forms.ModelChoiceField(queryset=Tag.objects.all(), required=False, empty_label="(none)")
