"""The deployment wizard's forms: the nodes stage, versions and settings, the acceptance criteria and the approval.

The forms only shape the input; the services check it (catalogue versions, ranges, known host names) and their
errors, keyed by path (`options.versions.cuda`, `criteria.hbm_bandwidth.retries`, `nodes`), land on the field
that path names, or at the top of the form when no field does."""

import re

from django import forms

from apps.core.forms import flat_messages
from apps.deployments import catalogue
from apps.deployments.artefacts import NCCL_DEBUG_LEVELS, PLACEMENTS
from apps.deployments.artefacts.base import ALLOWED_ENV_PREFIXES
from apps.deployments.choices import Comparator
from apps.deployments.kinds.deploy import Deploy
from apps.deployments.options import PLAN_DEFAULTS, merged
from apps.inventory.choices import FirmwareComponent, StorageTierKind
from apps.inventory.models import Rack, Tag
from apps.jobs import services as job_services
from apps.nodeexec.transports import default_transport

SEP = "__"  # a form field for option `network.mtu` is named `network__mtu`
HOSTNAMES = re.compile(r"[\s,]+")
ENV_LINE = re.compile(r"([^=\s]+)\s*=(.*)")


def add_service_errors(form: forms.Form, detail, *, aliases: dict[str, str] | None = None) -> None:
    """Put a DeploymentError's detail ({path: [messages]}) onto the form: a path names a field (options. dropped,
    dots as SEP), an alias, or the nearest field above it (`options.environment.FOO` -> `environment`)."""
    if not isinstance(detail, dict):
        form.add_error(None, " ".join(str(item) for item in flat_messages(detail)))
        return
    aliases = aliases or {}
    for path, messages in detail.items():
        text = " ".join(str(m) for m in flat_messages(messages))
        field = _field_for(form, str(path), aliases)
        form.add_error(field, text if field else f"{path}: {text}")


def _field_for(form: forms.Form, path: str, aliases: dict[str, str]) -> str | None:
    if path in aliases:
        return aliases[path]
    parts = path.removeprefix("options.").split(".")
    while parts:
        name = SEP.join(parts)
        if name in form.fields:
            return name
        parts.pop()
    return None


# --- stage 1: nodes -------------------------------------------------------------------------------------------------


def _default_transport() -> str:
    return default_transport(offered=Deploy.transports)


class NodesForm(forms.Form):
    """Which nodes (racks, tags and/or host names), and the deployment's name, description and transport."""

    name = forms.CharField(max_length=64, help_text="Letters, digits, . _ - (e.g. h200-r04).")
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    transport = forms.ChoiceField(choices=[(name, name) for name in Deploy.transports], initial=_default_transport)
    racks = forms.ModelMultipleChoiceField(
        Rack.objects.order_by("name"), to_field_name="name", required=False, widget=forms.CheckboxSelectMultiple
    )
    tags = forms.ModelMultipleChoiceField(
        Tag.objects.order_by("slug"), to_field_name="slug", required=False, widget=forms.CheckboxSelectMultiple
    )
    hostnames = forms.CharField(
        required=False,
        label="Host names",
        widget=forms.TextInput(attrs={"placeholder": "gpu017, gpu018", "class": "mono"}),
        help_text="Separated by commas or spaces.",
    )

    # Where the services' target errors belong.
    ALIASES = {"nodes": "hostnames", "targets": "hostnames", "role": None}

    def __init__(self, *args, editing: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        if editing:  # a draft's name and transport are fixed once created
            for name in ("name", "transport"):
                self.fields[name].disabled = True

    def clean_hostnames(self) -> list[str]:
        return [name for name in HOSTNAMES.split(self.cleaned_data.get("hostnames") or "") if name]

    def clean(self):
        data = super().clean()
        if not (data.get("racks") or data.get("tags") or data.get("hostnames")) and not self.errors:
            raise forms.ValidationError("Pick racks, tags or host names.")
        return data

    def known_targets(self, refused: set[str]) -> job_services.TargetSpec | None:
        """The targets when every target field passed its shape and one names something; else None (not judged)."""
        fields = ("racks", "tags", "hostnames")
        if refused & set(fields) or not any(self.cleaned_data.get(name) for name in fields):
            return None
        return self.targets()

    def targets(self) -> job_services.TargetSpec:
        data = self.cleaned_data
        return job_services.TargetSpec(
            nodes=tuple(data["hostnames"]),
            racks=tuple(rack.name for rack in data["racks"]),
            tags=tuple(tag.slug for tag in data["tags"]),
        )

    @staticmethod
    def initial_for(deployment) -> dict:
        spec = deployment.target_spec or {}
        return {
            "name": deployment.name,
            "description": deployment.description,
            "transport": deployment.transport or _default_transport(),
            "racks": spec.get("racks", []),
            "tags": spec.get("tags", []),
            "hostnames": ", ".join(spec.get("nodes", [])),
        }


# --- stage 2: versions and settings ---------------------------------------------------------------------------------


def _select(choices, **kwargs) -> forms.CharField:
    # A CharField shown as a select: the service, not the form, decides what is allowed (one message, one place).
    return forms.CharField(widget=forms.Select(choices=[(c, c) for c in choices]), **kwargs)


# (section, title, [(name, field factory)])
SETTINGS = [
    (
        "baselines",
        "Firmware baselines",
        [(c.value, lambda c=c: forms.CharField(required=False, label=c.label)) for c in FirmwareComponent],
    ),
    (
        "network",
        "Network",
        [
            ("mtu", lambda: forms.IntegerField(label="MTU")),
            ("rss_queues", lambda: forms.IntegerField(label="RSS queues")),
            ("rdma_priority", lambda: forms.IntegerField(label="RDMA priority (PFC)")),
            ("dscp", lambda: forms.IntegerField(label="DSCP")),
            ("ecn", lambda: forms.BooleanField(required=False, label="ECN")),
        ],
    ),
    (
        "nccl",
        "NCCL",
        [
            ("socket_ifname", lambda: forms.CharField(required=False, label="NCCL_SOCKET_IFNAME")),
            ("ib_hca", lambda: forms.CharField(required=False, label="NCCL_IB_HCA")),
            ("debug", lambda: _select(NCCL_DEBUG_LEVELS, label="NCCL_DEBUG")),
        ],
    ),
    (
        "cgroup",
        "Cgroups",
        [
            ("slice", lambda: forms.CharField(label="Slice")),
            ("system_cpus_per_socket", lambda: forms.IntegerField(label="System CPUs per socket")),
            ("system_memory_gib", lambda: forms.IntegerField(label="System memory (GiB)")),
        ],
    ),
    (
        "checkpoints",
        "Checkpoints",
        [
            ("every_steps", lambda: forms.IntegerField(label="Every N steps")),
            ("mount", lambda: forms.CharField(label="Mount point")),
            ("tier", lambda: _select(StorageTierKind.values, label="Storage tier")),
            ("keep_last", lambda: forms.IntegerField(label="Keep last")),
        ],
    ),
    ("scheduler", "Scheduler", [("placement", lambda: _select(PLACEMENTS, label="Placement"))]),
    (
        "acceptance",
        "Cluster acceptance",
        [
            (
                "cluster",
                lambda: forms.BooleanField(
                    required=False,
                    label="Cluster acceptance",
                    help_text="After the per-node phases: multi-node NCCL, the sweep for a slow node or link, "
                    "HPL-MxP (two nodes or more).",
                ),
            )
        ],
    ),
]


class VersionsForm(forms.Form):
    """Software versions (from the catalogue), firmware baselines and the plan's settings, section by section."""

    environment = forms.CharField(
        required=False,
        label="Extra environment",
        widget=forms.Textarea(attrs={"rows": 4, "class": "mono", "placeholder": "WANDB_PROJECT=llama-pretrain"}),
        help_text="One KEY=value a line. GPU, communication and framework settings only: names starting with "
        + ", ".join(ALLOWED_ENV_PREFIXES)
        + " (none that loads a plugin or library).",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name in catalogue.SOFTWARE:
            self.fields[f"versions{SEP}{name}"] = _select(
                catalogue.SOFTWARE[name], label=catalogue.SOFTWARE_LABELS.get(name, name)
            )
        for section, _, fields in SETTINGS:
            for name, make in fields:
                self.fields[f"{section}{SEP}{name}"] = make()

    def sections(self) -> list[tuple[str, list]]:
        """(title, [bound fields]) for the template, versions first."""
        groups = [("Software versions", [self[f"versions{SEP}{name}"] for name in catalogue.SOFTWARE])]
        for section, title, fields in SETTINGS:
            groups.append((title, [self[f"{section}{SEP}{name}"] for name, _ in fields]))
        return groups

    def clean_environment(self) -> dict[str, str]:
        result, bad = {}, []
        for number, line in enumerate((self.cleaned_data.get("environment") or "").splitlines(), start=1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            match = ENV_LINE.fullmatch(line.strip())
            if not match:
                bad.append(f"line {number}")
                continue
            result[match[1]] = match[2].strip()
        if bad:
            raise forms.ValidationError(f"Write KEY=value ({', '.join(bad)}).")
        return result

    def option_edits(self) -> dict:
        edits: dict[str, dict] = {}
        for key, value in self.cleaned_data.items():
            if key == "environment":
                edits["environment"] = value
                continue
            section, name = key.split(SEP, 1)
            if value is None or (value == "" and section != "baselines"):
                continue
            edits.setdefault(section, {})[name] = value
        return edits

    @staticmethod
    def initial_for(deployment) -> dict:
        options = merged(PLAN_DEFAULTS, deployment.options or {})  # a value the stored plan lacks: its default
        initial = {}
        for section in ("versions", *(section for section, _, _ in SETTINGS)):
            for name, value in (options.get(section) or {}).items():
                initial[f"{section}{SEP}{name}"] = value
        initial["environment"] = "\n".join(f"{k}={v}" for k, v in (options.get("environment") or {}).items())
        return initial


# --- stage 3: acceptance criteria -----------------------------------------------------------------------------------

CRITERIA_FIELDS = (
    ("threshold", lambda: forms.FloatField(min_value=0, label="Threshold")),
    ("warn_threshold", lambda: forms.FloatField(min_value=0, required=False, label="Warn")),
    ("retries", lambda: forms.IntegerField(min_value=0, max_value=10, label="Retries")),
    ("cooldown_seconds", lambda: forms.FloatField(min_value=0, label="Cool-down (s)")),
)


class CriteriaForm(forms.Form):
    """The editable part of each check's criterion: threshold, warn threshold, retries and cool-down."""

    def __init__(self, *args, criteria: dict, **kwargs):
        self.criteria = criteria
        super().__init__(*args, **kwargs)
        for check in criteria:
            for name, make in CRITERIA_FIELDS:
                field = make()
                field.widget.attrs.update({"step": "any", "class": "num"})
                self.fields[f"{check}{SEP}{name}"] = field
        if not self.is_bound:
            self.initial = {
                f"{check}{SEP}{name}": values.get(name)
                for check, values in criteria.items()
                for name, _ in CRITERIA_FIELDS
            }

    def rows(self) -> list[dict]:
        return [
            {
                "check": check,
                "comparator": Comparator(values["comparator"]).label if values.get("comparator") else "",
                "unit": values.get("unit", ""),
                "reference": values.get("reference", ""),
                "description": values.get("description", ""),
                "fields": [self[f"{check}{SEP}{name}"] for name, _ in CRITERIA_FIELDS],
            }
            for check, values in self.criteria.items()
        ]

    def criteria_edits(self) -> dict:
        edits: dict[str, dict] = {}
        for key, value in self.cleaned_data.items():
            check, name = key.split(SEP, 1)
            if value != self.criteria.get(check, {}).get(name):
                edits.setdefault(check, {})[name] = value
        return edits

    def add_service_errors(self, detail) -> None:
        # criteria.<check>.<field> -> <check>__<field>
        add_service_errors(self, {str(k).removeprefix("criteria."): v for k, v in detail.items()})


# --- stage 4: approval ----------------------------------------------------------------------------------------------


class ApproveForm(forms.Form):
    """Sign off the plan; tick a disruptive step to approve it up front on the nodes and commands shown."""

    steps = forms.MultipleChoiceField(required=False, widget=forms.CheckboxSelectMultiple)

    def __init__(self, *args, steps: list[str], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["steps"].choices = [(name, name) for name in steps]


class RebootForm(forms.Form):
    """The node page's Reboot action: the `reboot` kind's timeouts keep their defaults."""

    force = forms.BooleanField(required=False, label="Force: reboot it although it is not drained")
