from django import forms

from apps.inventory.models import Node, Rack, Tag
from apps.jobs.services import TargetSpec
from apps.nodeexec.transports import TRANSPORT_NAMES

SCOPES = [("all", "All nodes"), ("rack", "A rack"), ("tag", "A tag"), ("nodes", "Named nodes")]


class DiscoverForm(forms.Form):
    """Which nodes to discover, and over which transport."""

    scope = forms.ChoiceField(choices=SCOPES, initial="all", label="Nodes")
    rack = forms.ModelChoiceField(
        queryset=Rack.objects.order_by("name"), required=False, to_field_name="name", empty_label="Choose a rack"
    )
    tag = forms.ModelChoiceField(
        queryset=Tag.objects.order_by("slug"), required=False, to_field_name="slug", empty_label="Choose a tag"
    )
    nodes = forms.CharField(
        required=False, max_length=10000, label="Host names", help_text="Host names, separated by spaces or commas."
    )
    transport = forms.ChoiceField(choices=[(name, name) for name in TRANSPORT_NAMES])

    def clean(self):
        data = super().clean()
        scope = data.get("scope")
        if scope == "rack" and not data.get("rack"):
            self.add_error("rack", "Choose a rack.")
        elif scope == "tag" and not data.get("tag"):
            self.add_error("tag", "Choose a tag.")
        elif scope == "nodes":
            names = [name for name in data.get("nodes", "").replace(",", " ").split() if name]
            if not names:
                self.add_error("nodes", "Name at least one node.")
            data["node_names"] = names
        return data

    def targets(self) -> TargetSpec:
        data = self.cleaned_data
        scope = data["scope"]
        if scope == "rack":
            return TargetSpec(racks=(data["rack"].name,))
        if scope == "tag":
            return TargetSpec(tags=(data["tag"].slug,))
        if scope == "nodes":
            return TargetSpec(nodes=tuple(data["node_names"]))
        return TargetSpec(nodes=tuple(Node.objects.order_by("hostname").values_list("hostname", flat=True)))
