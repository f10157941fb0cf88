from django import forms

from apps.inventory.models import Node
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
