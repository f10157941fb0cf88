from django import forms

from apps.benchmarks.choices import (
    BURN_IN_DEFAULT_SECONDS,
    BURN_IN_MAX_SECONDS,
    BURN_IN_MIN_SECONDS,
    HPL_MAX_N,
    HPL_MIN_N,
    ITERATIONS,
    MAX_BYTES,
    MAX_ITERATIONS,
    NODE_SUITE_TRANSPORTS,
    BurnLoad,
    Collective,
    Suite,
)
from apps.inventory.models import Rack, Tag
from apps.jobs.services import TargetSpec

SCOPES = [("rack", "A rack"), ("tag", "A tag"), ("nodes", "Named nodes or a filter")]
UNITS = {"K": 2**10, "M": 2**20, "G": 2**30}


def parse_size(text: str) -> int:
    """nccl-tests' sizes: a whole number of bytes with an optional K, M or G (powers of 1024)."""
    text = (text or "").strip()
    number, unit = (text[:-1], UNITS[text[-1].upper()]) if text[-1:].upper() in UNITS else (text, 1)
    if not number.isdigit():
        raise forms.ValidationError("A size in bytes, or with K, M or G (e.g. 8, 1M, 16G).")
    return int(number) * unit


class SizeField(forms.CharField):
    def to_python(self, value):
        return parse_size(super().to_python(value))


class BenchmarkForm(forms.Form):
    """Start a benchmark: the suite, the nodes (a rack, a tag, or names / rack:NAME / tag:NAME), sizes, collective."""

    suite = forms.ChoiceField(choices=Suite.choices, initial=Suite.SWEEP)
    scope = forms.ChoiceField(choices=SCOPES, initial="rack", label="Nodes")
    rack = forms.ModelChoiceField(
        queryset=Rack.objects.order_by("name"), required=False, to_field_name="name", empty_label="Choose a rack"
    )
    tag = forms.ModelChoiceField(
        queryset=Tag.objects.order_by("slug"), required=False, to_field_name="slug", empty_label="Choose a tag"
    )
    nodes = forms.CharField(
        required=False,
        max_length=10000,
        label="Names / filter",
        help_text="Host names, rack:NAME or tag:NAME, separated by commas.",
    )
    collective = forms.ChoiceField(choices=Collective.choices, initial=Collective.ALL_REDUCE)
    min_bytes = SizeField(initial="8", label="Smallest size")
    max_bytes = SizeField(initial="16G", label="Largest size")
    iterations = forms.IntegerField(
        min_value=1,
        max_value=MAX_ITERATIONS,
        initial=ITERATIONS,
        required=False,
        label="Iterations",
        help_text=f"nccl-tests -n per size (empty: {ITERATIONS}).",
    )
    # local only for the per-node suites: the service refuses it for NCCL, naming the transport
    transport = forms.ChoiceField(choices=NODE_SUITE_TRANSPORTS)
    cooldown_seconds = forms.FloatField(min_value=0, max_value=3600, initial=5.0, label="Cool-down (s)")
    duration_seconds = forms.IntegerField(
        min_value=BURN_IN_MIN_SECONDS,
        max_value=BURN_IN_MAX_SECONDS,
        initial=BURN_IN_DEFAULT_SECONDS,
        required=False,
        label="Soak (s)",
        help_text="Burn-in only.",
    )
    burn_load = forms.ChoiceField(
        choices=BurnLoad.choices, initial=BurnLoad.GPU_BURN, required=False, label="Soak load"
    )
    hpl_n = forms.IntegerField(
        min_value=HPL_MIN_N,
        max_value=HPL_MAX_N,
        required=False,
        label="HPL-MxP N",
        help_text="Empty: the largest order that fits the GPUs' memory.",
    )

    def clean_iterations(self) -> int:
        return self.cleaned_data["iterations"] or ITERATIONS  # left empty: nccl-tests' own default

    def clean(self):
        data = super().clean()
        scope = data.get("scope")
        if scope == "rack" and not data.get("rack"):
            self.add_error("rack", "Choose a rack.")
        elif scope == "tag" and not data.get("tag"):
            self.add_error("tag", "Choose a tag.")
        elif scope == "nodes" and not (data.get("nodes") or "").strip():
            self.add_error("nodes", "Name at least one node, rack:NAME or tag:NAME.")
        if data.get("max_bytes") is not None and data["max_bytes"] > MAX_BYTES:
            self.add_error("max_bytes", "At most 16 GiB (16G).")
        low, high = data.get("min_bytes"), data.get("max_bytes")
        if low is not None and high is not None and low > high:
            self.add_error("min_bytes", "The smallest size is above the largest.")
        return data

    def targets(self) -> TargetSpec:
        from apps.benchmarks.services import parse_nodes

        data = self.cleaned_data
        if data["scope"] == "rack":
            return TargetSpec(racks=(data["rack"].name,))
        if data["scope"] == "tag":
            return TargetSpec(tags=(data["tag"].slug,))
        return parse_nodes(data["nodes"].replace(" ", ","))


class TimelineCompareForm(forms.Form):
    """Two timeline analyses by public id."""

    a = forms.UUIDField(label="First analysis")
    b = forms.UUIDField(label="Second analysis")
