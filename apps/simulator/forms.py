from django import forms

from apps.inventory.models import Node
from apps.simulator.faults.kinds import CHOICES as FAULT_KIND_CHOICES


class FaultForm(forms.Form):
    node = forms.ModelChoiceField(
        queryset=Node.objects.filter(gpus__isnull=False).distinct().order_by("hostname"), to_field_name="hostname"
    )
    kind = forms.ChoiceField(choices=FAULT_KIND_CHOICES)
    target = forms.CharField(
        max_length=255, required=False, help_text="GPU index, NIC name, priority, mount point or file; empty: default."
    )
