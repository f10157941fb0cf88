from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.core.api import EveryBadField
from apps.core.text import echo
from apps.diagnosis import rehearsal, services, utilisation
from apps.diagnosis.choices import Problem
from apps.diagnosis.costs import incident_cost
from apps.inventory.models import Node
from apps.jobs.api.serializers import artifact_url
from apps.workloads.models import TrainingJob


class TriageTextSerializer(serializers.Serializer):
    text = serializers.CharField(trim_whitespace=False, help_text="The log's text.")


class TriageUploadSerializer(serializers.Serializer):
    file = serializers.FileField(help_text="A text log file.")


class FindingSerializer(serializers.Serializer):
    problem = serializers.ChoiceField(choices=Problem.choices)
    label = serializers.CharField()
    source = serializers.CharField(help_text="The file name, or 'pasted log'.")
    lines = serializers.ListField(child=serializers.IntegerField(), help_text="Cited line numbers, from 1.")
    excerpt = serializers.ListField(child=serializers.CharField(), help_text="The cited lines, as written.")
    count = serializers.IntegerField(help_text="Lines that matched (more than cited when capped).")
    detail = serializers.CharField()
    rank = serializers.IntegerField(allow_null=True)
    node = serializers.CharField(allow_null=True)
    gpu = serializers.CharField(allow_null=True, help_text="PCI bus id, UUID or CUDA device index, as the log says.")
    nic = serializers.CharField(allow_null=True)
    xid = serializers.IntegerField(allow_null=True)
    xid_name = serializers.CharField(allow_null=True)
    xid_meaning = serializers.CharField(allow_null=True)
    peer = serializers.CharField(allow_null=True)
    device = serializers.CharField(allow_null=True, help_text="A PCI device not known to be a GPU.")
    explanation = serializers.CharField()
    runbook = serializers.CharField()
    next_step = serializers.CharField()


class TriageResultSerializer(serializers.Serializer):
    source = serializers.CharField()
    lines = serializers.IntegerField(help_text="Non-blank lines read.")
    recognised = serializers.BooleanField(help_text="False when no rule fired: nothing is guessed.")
    message = serializers.CharField()
    findings = FindingSerializer(many=True)


# --- incidents ---------------------------------------------------------------------------------------------------


class IncidentCreateSerializer(EveryBadField, serializers.Serializer):
    training_job = serializers.UUIDField(required=False, allow_null=True, help_text="The failing training job.")
    node = serializers.CharField(required=False, allow_blank=True, max_length=255, help_text="A node's host name.")
    title = serializers.CharField(required=False, allow_blank=True, max_length=200, default="")
    symptom = serializers.CharField(required=False, allow_blank=True, max_length=10000, default="")
    transport = serializers.ChoiceField(choices=["ssh", "sim"], required=False, default="")
    runbook = serializers.ChoiceField(
        choices=["nccl-timeout", "gpu-utilisation", "training-interrupted"],
        required=False,
        default="nccl-timeout",
        help_text="Runbook 1 (NCCL timeout / hang), runbook 2 (GPU utilisation fluctuating; needs training_job) or "
        "runbook 3 (training interrupted: recovery; needs training_job).",
    )
    start = serializers.BooleanField(required=False, default=True, help_text="Start the runbook at once.")
    sample_seconds = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=utilisation.MIN_WINDOW_S,
        max_value=utilisation.MAX_WINDOW_S,
        help_text=f"Runbook 2 only: the sampling window in seconds (default {utilisation.WINDOW_S}: a data-loader "
        f"period shows when the window holds it {utilisation.MIN_PERIODS} times).",
    )

    def validate_training_job(self, value):
        if value is None:
            return None
        found = TrainingJob.objects.filter(public_id=value).first()
        if found is None:
            raise serializers.ValidationError(f"No training job matches {echo(str(value))}.")
        return found

    def validate_node(self, value):
        if not value:
            return None
        found = Node.objects.filter(hostname=value).first()
        if found is None:
            raise serializers.ValidationError(f"No node matches {echo(value)}.")
        return found

    def errors_beyond_shape(self, passed: dict, refused: set[str]) -> dict:
        return services.incident_errors(
            runbook=passed.get("runbook", ""),
            training_job=passed.get("training_job"),
            node=passed.get("node"),
            sample_seconds=passed.get("sample_seconds"),
            subject_refused=bool(refused & {"training_job", "node"}),
        )

    def validate(self, attrs):
        # Every shape passed: the incident's checks, all at once, before anything is written.
        if found := self.errors_beyond_shape(attrs, set()):
            raise serializers.ValidationError(found)
        return attrs


class RehearsalCreateSerializer(EveryBadField, serializers.Serializer):
    """A fault injected on the simulator: by its id, or by the node and fault kind (the newest such fault there).
    Validated, it holds the fault found (`fault`)."""

    fault = serializers.UUIDField(required=False, allow_null=True, help_text="The injected fault's id.")
    node = serializers.CharField(
        required=False, allow_blank=True, max_length=255, help_text="With `kind`: the faulty node's host name."
    )
    # The kinds a runbook can be rehearsed against, so the schema's enum says which (the others hurt no training job).
    kind = serializers.ChoiceField(
        choices=rehearsal.rehearsable_kinds(),
        required=False,
        allow_blank=True,
        help_text="With `node`: the fault's kind (e.g. pfc_off), one that hurts a training job.",
        error_messages={
            "invalid_choice": "Not a kind a runbook can be rehearsed against: name one that hurts a training job."
        },
    )

    def errors_beyond_shape(self, passed: dict, refused: set[str]) -> dict:
        return self._found(passed, refused)[1]

    def validate(self, attrs):
        fault, errors = self._found(attrs, set())
        if errors:
            raise serializers.ValidationError(errors)
        return {"fault": fault}

    @staticmethod
    def _found(data: dict, refused: set[str]):
        return rehearsal.requested_fault(
            fault_id=data.get("fault"), node=data.get("node"), kind=data.get("kind"), refused=refused
        )


class EvidenceSerializer(serializers.Serializer):
    seq = serializers.IntegerField()
    hostname = serializers.CharField()
    command = serializers.CharField()
    observed_at = serializers.DateTimeField()
    topic = serializers.CharField(
        help_text="watchdog, ib, cuda, disk, progress, mtu, pfc, ecn, link, xid; runbook 2: series, power_cap, "
        "thermal, hw_slowdown, clocks_capped, throttle, lag, dips, placement"
    )
    subject = serializers.CharField()
    verdict = serializers.CharField()
    summary = serializers.CharField()
    excerpt = serializers.CharField()
    data = serializers.JSONField()
    job = serializers.UUIDField(source="job.public_id", allow_null=True, default=None)
    raw_output = serializers.SerializerMethodField(help_text="The API URL of the command's raw output.")

    def get_raw_output(self, row) -> str | None:
        if row.artifact_id is None or row.job_id is None:
            return None
        return artifact_url(row.job, row.artifact, self.context.get("request"))


class HypothesisSerializer(serializers.Serializer):
    cause = serializers.CharField()
    label = serializers.CharField(source="get_cause_display")
    score = serializers.IntegerField()
    rank = serializers.IntegerField()
    suggestion = serializers.CharField()
    supporting = serializers.SerializerMethodField(help_text="seq numbers of the evidence for it")
    contradicting = serializers.SerializerMethodField(help_text="seq numbers of the evidence against it")

    def get_supporting(self, hypothesis) -> list[int]:
        return sorted(row.seq for row in hypothesis.supporting.all())

    def get_contradicting(self, hypothesis) -> list[int]:
        return sorted(row.seq for row in hypothesis.contradicting.all())


class RankingChangeSerializer(serializers.Serializer):
    seq = serializers.IntegerField()
    created = serializers.DateTimeField()
    reason = serializers.CharField()
    ranking = serializers.JSONField()


class RecoveryPlanSerializer(serializers.Serializer):
    resume_step = serializers.IntegerField(required=False, allow_null=True, help_text="The checkpoint resumed from.")
    hosts = serializers.ListField(child=serializers.CharField(), required=False, help_text="Node-rank order.")
    removed = serializers.ListField(
        child=serializers.IntegerField(), required=False, help_text="Checkpoint steps removed to free space."
    )
    excluded = serializers.ListField(child=serializers.CharField(), required=False, help_text="Nodes left out.")
    replaced = serializers.DictField(
        child=serializers.CharField(), required=False, help_text="Bad node → the spare in its place."
    )
    automatic = serializers.BooleanField(required=False, help_text="Approved by the job's recovery policy.")


class RemediationSerializer(serializers.Serializer):
    id = serializers.UUIDField(source="public_id")
    cause = serializers.CharField()
    summary = serializers.CharField()
    commands = serializers.JSONField(help_text="[{hostname, command, values, text}], exact per node")
    state = serializers.CharField()
    approved_by = serializers.CharField(source="approved_by.username", default=None, allow_null=True)
    approved_at = serializers.DateTimeField(allow_null=True)
    fix_job = serializers.UUIDField(source="fix_job.public_id", default=None, allow_null=True)
    verify_job = serializers.UUIDField(source="verify_job.public_id", default=None, allow_null=True)
    outcome = serializers.CharField()
    artefact = serializers.CharField(
        help_text="A recovery's resume (torchrun commands, Slurm requeue or Job manifest), or runbook 2's scheduler "
        "fix (pod anti-affinity and scheduler profile, or the Slurm job's exclusive requeue), shown before a person "
        "applies it."
    )
    plan = RecoveryPlanSerializer(help_text="A recovery's choices (empty for runbook 1's fixes).")


class IncidentSerializer(serializers.Serializer):
    id = serializers.UUIDField(source="public_id")
    title = serializers.CharField()
    runbook = serializers.CharField(
        help_text="nccl-timeout (runbook 1), gpu-utilisation (runbook 2) or training-interrupted (runbook 3)."
    )
    state = serializers.CharField()
    colour = serializers.CharField()
    symptom = serializers.CharField()
    training_job = serializers.CharField(source="training_job.name", default=None, allow_null=True)
    node = serializers.CharField(source="node.hostname", default=None, allow_null=True)
    suspect_nodes = serializers.SerializerMethodField(help_text="Host names the runbook checks.")
    cause = serializers.CharField()
    conclusion = serializers.CharField()
    escalated = serializers.BooleanField()
    rehearsal = serializers.BooleanField(help_text="Started from the simulator page against an injected fault.")
    recurrence_of = serializers.UUIDField(source="recurrence_of.public_id", default=None, allow_null=True)
    opened_by = serializers.CharField(source="opened_by.username", default=None, allow_null=True)
    created = serializers.DateTimeField()
    resolved_at = serializers.DateTimeField(allow_null=True)
    resolution = serializers.CharField()
    jobs = serializers.SerializerMethodField(help_text="The runbook's jobs (their ids), oldest first.")

    def get_suspect_nodes(self, incident) -> list[str]:
        return sorted(node.hostname for node in incident.suspect_nodes.all())

    def get_jobs(self, incident) -> list[str]:
        return [str(job.public_id) for job in sorted(incident.jobs.all(), key=lambda job: job.created)]


class LossSerializer(serializers.Serializer):
    what = serializers.ChoiceField(choices=["work", "quarantine"], help_text="A job's lost work, or a drain.")
    event = serializers.UUIDField(
        allow_null=True, help_text="The health event it comes from (none: the incident's job)."
    )
    gpu_hours = serializers.FloatField()
    gpus = serializers.IntegerField()
    seconds = serializers.FloatField()
    detail = serializers.CharField()


class SloBurnSerializer(serializers.Serializer):
    slo = serializers.CharField()
    budget_percent = serializers.FloatField(allow_null=True, help_text="Percent of its 30-day error budget.")
    note = serializers.CharField(allow_blank=True, help_text="Why there is no percent; empty beside one.")


class IncidentCostSerializer(serializers.Serializer):
    gpu_hours_lost = serializers.FloatField(help_text='Every loss once (docs/health.md, "Failure costs").')
    losses = LossSerializer(many=True)
    slo_budget_burned = SloBurnSerializer(many=True, allow_null=True, help_text="Null: not measured.")

    @staticmethod
    def represent(cost) -> dict:
        losses = [
            {
                "what": line.loss.what,
                "event": line.events[0].public_id if line.events else None,
                **{name: getattr(line.loss, name) for name in ("gpu_hours", "gpus", "seconds", "detail")},
            }
            for line in cost.lines
        ]
        return {"gpu_hours_lost": cost.gpu_hours_lost, "losses": losses, "slo_budget_burned": cost.slo}


class IncidentDetailSerializer(IncidentSerializer):
    evidence = EvidenceSerializer(many=True)
    hypotheses = HypothesisSerializer(many=True)
    ranking_changes = RankingChangeSerializer(many=True)
    remediations = RemediationSerializer(many=True)
    cost = serializers.SerializerMethodField(help_text="What it cost: GPU-hours lost and SLO budget burned.")

    @extend_schema_field(IncidentCostSerializer)
    def get_cost(self, incident) -> dict:
        return IncidentCostSerializer(
            IncidentCostSerializer.represent(incident_cost(incident, now=timezone.now()))
        ).data


class DryRunSerializer(serializers.Serializer):
    remediation = serializers.UUIDField()
    commands = serializers.ListField(child=serializers.CharField(), help_text="host$ exact command, in order")
