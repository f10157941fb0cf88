from django import forms
from django.db.models import Exists, OuterRef

from apps.inventory.models import Gpu, Node
from apps.simulator.faults.kinds import CHOICES as FAULT_KIND_CHOICES
from apps.simulator.faults.kinds import FAULT_KINDS


def _parameters() -> dict[str, list[str]]:
    """Each parameter any fault kind takes (its name) and the kinds that take it, in the kinds' order."""
    taken: dict[str, list[str]] = {}
    for spec in FAULT_KINDS.values():
        for name in spec.parameters:
            taken.setdefault(name, []).append(spec.value)
    return taken


PARAMETER_KINDS = _parameters()
# Each parameter as the form labels it, with its unit: "Rate gbps" and "Crc per million" read as the code's names.
PARAMETER_LABELS = {
    "mtu": "MTU (bytes)",
    "rate_gbps": "link rate, Gb/s (0: the cable keeps its rate, for CRC errors alone)",
    "crc_per_million": "CRC errors per million frames",
    "watts": "power cap, W",
    "temperature": "temperature, °C",
    "sm_clock_mhz": "SM clock, MHz",
    "gen": "PCIe generation",
    "width": "PCIe lanes",
    "link": "NVLink link",
    "links": "NVLink links down",
    "count": "count",
    "after_s": "after, s",
    "hang_s": "hang, s",
    "period_s": "period, s",
    "stall_pct": "stall, % of the period",
    "speed_pct": "speed, % of the other ranks'",
    "flow_pct": "flow, % of the design flow",
}


def simulated_nodes():
    """The nodes the simulator answers for: those with GPUs."""
    return Node.objects.filter(Exists(Gpu.objects.filter(node=OuterRef("pk")))).order_by("hostname")


class FaultForm(forms.Form):
    """A fault to inject, with its kind's parameters (an MTU value, a cable's rate and CRC errors, a temperature...):
    one number field per parameter name, which the page shows for the kinds that take it; left empty, a parameter
    takes its kind's default. The API takes the same `parameters`."""

    # A host name typed (the page offers the simulated nodes in a datalist): a select of a fleet's thousands of nodes
    # costs the page hundreds of ms to render and the operator a long scroll.
    node = forms.ModelChoiceField(
        queryset=simulated_nodes(),
        to_field_name="hostname",
        widget=forms.TextInput(attrs={"list": "simulated-nodes", "placeholder": "host name", "autocomplete": "off"}),
        error_messages={"invalid_choice": "No simulated node of that name (a node with GPUs in the inventory)."},
    )
    kind = forms.ChoiceField(choices=FAULT_KIND_CHOICES)
    target = forms.CharField(
        max_length=255, required=False, help_text="GPU index, NIC name, priority, mount point or file; empty: default."
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name, kinds in PARAMETER_KINDS.items():
            field = forms.IntegerField(required=False, label=PARAMETER_LABELS.get(name, name.replace("_", " ")))
            field.fault_kinds = " ".join(kinds)  # the page shows the field for these kinds
            defaults = {FAULT_KINDS[kind].parameters[name].default for kind in kinds}
            field.widget.attrs["placeholder"] = str(defaults.pop()) if len(defaults) == 1 else "default"
            self.fields[f"parameter_{name}"] = field

    def parameter_fields(self):
        return [(self[f"parameter_{name}"], self.fields[f"parameter_{name}"].fault_kinds) for name in PARAMETER_KINDS]

    def add_fault_errors(self, errors: dict) -> None:
        """Put what the fault's checks refused (services.fault_errors, inject_fault's ValidationError) on the fields
        they name, each bad parameter on its own field."""
        for field, problems in errors.items():
            if field == "parameters" and isinstance(problems, dict):
                for name, messages in problems.items():
                    named = f"parameter_{name}"
                    self.add_error(named if named in self.fields else None, messages)
            else:
                self.add_error(field if field in self.fields else None, problems)

    def clean(self):
        data = super().clean()
        spec = FAULT_KINDS.get(data.get("kind", ""))
        given = {name: data.get(f"parameter_{name}") for name in (spec.parameters if spec else ())}
        data["parameters"] = {name: value for name, value in given.items() if value is not None}
        return data
