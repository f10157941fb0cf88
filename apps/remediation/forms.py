from django import forms

from apps.remediation.choices import PartType


class PartForm(forms.Form):
    component_type = forms.ChoiceField(choices=PartType.choices)
    gpu_index = forms.IntegerField(required=False, min_value=0, max_value=15, help_text="For a GPU: its index.")
    label = forms.CharField(required=False, max_length=200, help_text="Other parts: the slot (NIC ib0, PSU 2).")
    old_serial = forms.CharField(required=False, max_length=64, help_text="Empty for a GPU: the inventory's.")
    new_serial = forms.CharField(max_length=64)
    note = forms.CharField(required=False, max_length=300)


class NoteForm(forms.Form):
    note = forms.CharField(required=False, max_length=1000)
