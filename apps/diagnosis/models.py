"""Incidents: what went wrong (a training job, a node or a failed check), the evidence the runbook gathered, the
causes it weighs and their ranking, the fix it proposes, who approved it, and how it ended.

Evidence and ranking changes are appended while the runbook's jobs run (their kind writes them); pages and the API
only read them.
"""

from django.conf import settings
from django.db import models

from apps.core.audit import AuditedModel
from apps.core.models import PublicModel, TimestampedModel
from apps.diagnosis.choices import (
    INCIDENT_ACTIVE,
    INCIDENT_STATE_COLOURS,
    INCIDENT_UNRESOLVED,
    Cause,
    EvidenceVerdict,
    IncidentState,
    RemediationState,
)
from apps.inventory.models import Node
from apps.jobs.models import Artifact, Job, JobStep
from apps.workloads.models import TrainingJob


class IncidentQuerySet(models.QuerySet):
    def active(self) -> "IncidentQuerySet":
        return self.filter(state__in=INCIDENT_ACTIVE)

    def unresolved(self) -> "IncidentQuerySet":
        """Every incident not resolved: the active ones and those a runbook could not resolve."""
        return self.filter(state__in=INCIDENT_UNRESOLVED)

    def touching(self, node: Node) -> "IncidentQuerySet":
        """Incidents about the node, its training jobs, or that found evidence on it."""
        return self.filter(
            models.Q(node=node) | models.Q(suspect_nodes=node) | models.Q(evidence__node=node)
        ).distinct()


class Incident(AuditedModel, PublicModel):
    """Something went wrong; the runbook finds out why and proposes the fix."""

    title = models.CharField(max_length=200)
    symptom = models.TextField(blank=True, help_text="What was seen, as the log or the operator said it.")
    state = models.CharField(max_length=16, choices=IncidentState.choices, default=IncidentState.OPEN)
    training_job = models.ForeignKey(
        TrainingJob, null=True, blank=True, on_delete=models.SET_NULL, related_name="incidents"
    )
    node = models.ForeignKey(Node, null=True, blank=True, on_delete=models.SET_NULL, related_name="incidents")
    check_step = models.ForeignKey(
        JobStep, null=True, blank=True, on_delete=models.SET_NULL, related_name="incidents", help_text="A failed check."
    )
    runbook = models.CharField(max_length=40, default="nccl-timeout")
    transport = models.CharField(max_length=8, blank=True, help_text="How its runbook reaches the nodes (ssh, sim).")
    jobs = models.ManyToManyField(Job, blank=True, related_name="incidents", help_text="The runbook's jobs.")
    suspect_nodes = models.ManyToManyField(Node, blank=True, related_name="suspected_in")
    cause = models.CharField(max_length=24, choices=Cause.choices, blank=True)
    conclusion = models.TextField(blank=True)
    recurrence_of = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="recurrences",
        help_text="An earlier incident resolved with the same cause on the same node: the fault came back.",
    )
    opened_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="incidents"
    )
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolution = models.TextField(blank=True)
    last_seq = models.PositiveIntegerField(default=0, help_text="Timeline counter (evidence and ranking changes).")
    rehearsal = models.BooleanField(
        default=False, help_text="Started from the simulator page to practise the runbook against an injected fault."
    )
    rehearsal_job_made = models.BooleanField(
        default=False,
        help_text="The rehearsal made its training job (a demo job on idle nodes): it ends when the rehearsal is "
        "resolved or its fault is cleared.",
    )

    objects = IncidentQuerySet.as_manager()

    class Meta:
        ordering = ["-created", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(training_job__isnull=False)
                | models.Q(node__isnull=False)
                | models.Q(check_step__isnull=False),
                name="incident_has_subject",
            ),
        ]

    def __str__(self) -> str:
        return self.title

    @property
    def colour(self) -> str:
        return INCIDENT_STATE_COLOURS[self.state]

    @property
    def escalated(self) -> bool:
        return self.recurrence_of_id is not None

    @property
    def active(self) -> bool:
        return self.state in INCIDENT_ACTIVE


class Evidence(TimestampedModel):
    """One thing the runbook read: where, what command, when, the lines that matter, and the raw output."""

    incident = models.ForeignKey(Incident, on_delete=models.CASCADE, related_name="evidence")
    seq = models.PositiveIntegerField()
    node = models.ForeignKey(Node, null=True, blank=True, on_delete=models.SET_NULL, related_name="evidence")
    hostname = models.CharField(max_length=255, blank=True)
    command = models.CharField(max_length=500, help_text="The exact command line that produced it.")
    observed_at = models.DateTimeField()
    topic = models.CharField(max_length=40, help_text="What was checked: watchdog, ib, cuda, mtu, pfc, ecn, link, xid.")
    subject = models.CharField(max_length=64, blank=True, help_text="The NIC, GPU or rank it is about.")
    verdict = models.CharField(max_length=16, choices=EvidenceVerdict.choices)
    summary = models.CharField(max_length=300)
    excerpt = models.TextField(blank=True, help_text="The lines it stands on, as the tool printed them.")
    data = models.JSONField(default=dict, blank=True, help_text="What was read, as values (ranks, MTU, priorities).")
    job = models.ForeignKey(Job, null=True, blank=True, on_delete=models.SET_NULL, related_name="diagnosis_evidence")
    artifact = models.ForeignKey(
        Artifact, null=True, blank=True, on_delete=models.SET_NULL, related_name="diagnosis_evidence"
    )

    class Meta:
        ordering = ["incident", "seq"]
        verbose_name_plural = "evidence"
        constraints = [models.UniqueConstraint(fields=["incident", "seq"], name="evidence_unique_seq")]

    def __str__(self) -> str:
        return f"{self.hostname} {self.topic}: {self.summary}"


class Hypothesis(TimestampedModel):
    """A cause the runbook weighs, its score and place, and the evidence for and against it."""

    incident = models.ForeignKey(Incident, on_delete=models.CASCADE, related_name="hypotheses")
    cause = models.CharField(max_length=24, choices=Cause.choices)
    score = models.IntegerField(default=0)
    rank = models.PositiveSmallIntegerField(default=0)
    supporting = models.ManyToManyField(Evidence, blank=True, related_name="supports")
    contradicting = models.ManyToManyField(Evidence, blank=True, related_name="contradicts")
    suggestion = models.TextField(blank=True, help_text="What to do if this is the cause.")

    class Meta:
        ordering = ["incident", "rank", "cause"]
        verbose_name_plural = "hypotheses"
        constraints = [models.UniqueConstraint(fields=["incident", "cause"], name="hypothesis_unique_cause")]

    def __str__(self) -> str:
        return f"{self.get_cause_display()} ({self.score})"


class RankingChange(TimestampedModel):
    """The ranking of the causes after a piece of evidence moved it (so the page can replay how it changed)."""

    incident = models.ForeignKey(Incident, on_delete=models.CASCADE, related_name="ranking_changes")
    seq = models.PositiveIntegerField()
    ranking = models.JSONField(help_text='[{"cause": ..., "score": ...}], best first.')
    reason = models.CharField(max_length=300)

    class Meta:
        ordering = ["incident", "seq"]
        constraints = [models.UniqueConstraint(fields=["incident", "seq"], name="rankingchange_unique_seq")]

    def __str__(self) -> str:
        return f"{self.incident} #{self.seq}: {self.reason}"


class Remediation(AuditedModel, PublicModel):
    """The fix for the concluded cause: exact commands per node, approved by an operator, run as a job, re-checked."""

    incident = models.ForeignKey(Incident, on_delete=models.CASCADE, related_name="remediations")
    cause = models.CharField(max_length=24, choices=Cause.choices)
    summary = models.CharField(max_length=300)
    commands = models.JSONField(
        default=list, help_text='[{"hostname", "command", "values", "text"}]: catalogue commands with their values.'
    )
    state = models.CharField(max_length=16, choices=RemediationState.choices, default=RemediationState.PROPOSED)
    approved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="remediations"
    )
    approved_at = models.DateTimeField(null=True, blank=True)
    fix_job = models.ForeignKey(Job, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    verify_job = models.ForeignKey(Job, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    outcome = models.TextField(blank=True)
    artefact = models.TextField(
        blank=True,
        help_text="A recovery's resume as it runs: the torchrun commands, the Slurm requeue, the Job manifest.",
    )
    plan = models.JSONField(
        default=dict,
        blank=True,
        help_text='A recovery\'s choices: {"resume_step", "hosts", "removed", "excluded", "replaced", "automatic"}.',
    )

    class Meta:
        ordering = ["incident", "-created"]

    def __str__(self) -> str:
        return self.summary

    @property
    def automatic(self) -> bool:
        """Whether the fix is commands Rackpilot runs (a cable swap is not)."""
        return bool(self.commands)
