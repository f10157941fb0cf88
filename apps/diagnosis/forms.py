from django import forms

from apps.core.api import errors_beyond_shape
from apps.diagnosis import services, utilisation
from apps.inventory.models import Node
from apps.jobs.kinds import get_kind
from apps.nodeexec.transports import default_transport
from apps.simulator.injection import injected_faults
from apps.workloads.models import TrainingJob


class TriageForm(forms.Form):
    """A log pasted or uploaded (one of the two), at most RACKPILOT_TRIAGE_MAX_BYTES."""

    text = forms.CharField(
        required=False, strip=False, widget=forms.Textarea(attrs={"rows": 14, "spellcheck": "false"})
    )
    file = forms.FileField(required=False)

    def clean(self):
        cleaned = super().clean()
        try:
            cleaned["source"], cleaned["log"] = services.read_submission(
                text=cleaned.get("text") or "", upload=cleaned.get("file"), limit=services.max_bytes()
            )
        except services.TriageInputError as error:
            self.add_error(error.field, error.message)
        return cleaned


class IncidentForm(forms.Form):
    """Open an incident about a training job or a node; runbook 1 starts at once."""

    training_job = forms.ModelChoiceField(
        queryset=TrainingJob.objects.exclude(log_path="").order_by("name"),
        required=False,
        to_field_name="public_id",
        empty_label="No training job",
        help_text="The training job that timed out or hangs.",
    )
    node = forms.ModelChoiceField(
        queryset=Node.objects.order_by("hostname"),
        required=False,
        to_field_name="hostname",
        empty_label="No node",
        help_text="Or a node.",
    )
    symptom = forms.CharField(required=False, max_length=10000, widget=forms.Textarea(attrs={"rows": 3}))
    transport = forms.ChoiceField(
        choices=[("sim", "sim (simulated cluster)"), ("ssh", "ssh")],
        initial=lambda: default_transport(offered=get_kind("nccl-timeout").transports),
    )
    runbook = forms.ChoiceField(
        choices=[
            ("nccl-timeout", "1. NCCL timeout / hang"),
            ("gpu-utilisation", "2. GPU utilisation fluctuating"),
            ("training-interrupted", "3. Training interrupted (recovery)"),
        ],
        initial="nccl-timeout",
        required=False,
    )
    sample_seconds = forms.IntegerField(
        label="Sampling window (s)",
        required=False,
        min_value=utilisation.MIN_WINDOW_S,
        max_value=utilisation.MAX_WINDOW_S,
        help_text=f"Runbook 2: how long to sample the GPUs (default {utilisation.WINDOW_S} s; a data-loader period "
        f"shows when the window holds it {utilisation.MIN_PERIODS} times).",
    )

    def clean(self):
        data = super().clean()
        # The incident's own checks, on the fields whose shape passed: every bad field at once.
        for field, messages in errors_beyond_shape(self.errors, data, _incident_errors).items():
            self.add_error(field if field in self.fields else None, messages)
        return data


def _incident_errors(data: dict, refused: set[str]) -> dict:
    return services.incident_errors(
        runbook=data.get("runbook") or "nccl-timeout",
        training_job=data.get("training_job"),
        node=data.get("node"),
        sample_seconds=data.get("sample_seconds"),
        subject_refused=bool(refused & {"training_job", "node"}),
    )


class RehearsalForm(forms.Form):
    """Rehearse the runbook of a fault injected on the simulator page."""

    fault = forms.ModelChoiceField(
        queryset=injected_faults(),
        to_field_name="public_id",
        error_messages={"invalid_choice": "No such injected fault: it may have been cleared."},
    )
