"""What a policy kind is: its parameters (validated against the scope), how it proposes from the telemetry, and
when what it did should be undone. Kinds register themselves; CostPolicy.kind names one.

A kind either runs commands on nodes (`job_kind`: apply and revert are jobs) or changes what Rackpilot records of the
cluster (`job_kind` None: `enact` records the change at once, e.g. a service's replicas) and hands the operator the
Kubernetes objects to apply (`artefacts`)."""

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

from django.forms.utils import pretty_name
from rest_framework import serializers


@dataclass
class Proposal:
    """What a dry run found: why, per GPU what changes, the exact command lines, and the expected saving."""

    reason: str
    plan: list[dict]
    commands: dict[str, list[str]]
    revert_commands: dict[str, list[str]]
    window_seconds: int
    expected_kwh_per_day: float
    throughput_factor: float = 1.0
    notes: list[str] = field(default_factory=list)

    @property
    def hostnames(self) -> list[str]:
        return sorted(self.commands)


class StaleAction(Exception):
    """`enact` refused: what the action was judged on has changed since (the message says how)."""


class PolicyKindSpec:
    """Subclass, set the class attributes and implement the methods; register with @register_policy_kind."""

    name: ClassVar[str]
    label: ClassVar[str] = ""
    parameters: ClassVar[type[serializers.Serializer]]  # each field with its label, bounds, default and help
    units: ClassVar[dict[str, str]] = {}  # a parameter's unit, written after its value and its label ("W", "%", "min")
    scopes: ClassVar[tuple[str, ...]] = ("cluster", "rack", "service")  # PolicyScope values it may act on
    job_kind: ClassVar[str | None]  # the job kind that applies and reverts its actions; None: `enact` does
    enforces: ClassVar[bool] = True  # the evaluation re-applies an applied action a node may have forgotten
    guards_latency: ClassVar[bool] = True  # its actions slow nodes: held, and undone, while a latency SLO burns

    def parameter_label(self, name: str) -> str:
        """How the pages name a parameter: its label, with its unit ("Power limit (W)")."""
        field = self.parameters().fields.get(name)
        label = str(field.label) if field is not None else pretty_name(name)
        return f"{label} ({self.units[name]})" if name in self.units else label

    def described(self, parameters: dict) -> list[tuple[str, str]]:
        """A policy's parameters as the pages show them: (label, value with its unit), in the kind's order; a name it
        no longer declares after the declared ones, in words."""
        fields = self.parameters().fields
        names = [name for name in fields if name in parameters] + [name for name in parameters if name not in fields]
        return [
            (
                str(fields[name].label) if name in fields else pretty_name(name),
                with_unit(parameters[name], self.units.get(name, "")),
            )
            for name in names
        ]

    def check(self, parameters: dict, *, nodes, policy=None) -> dict:
        """The validated parameters, or serializers.ValidationError keyed by parameter name; `nodes` is the scope,
        `policy` the (unsaved) policy naming it."""
        serializer = self.parameters(data=parameters or {})
        serializer.is_valid(raise_exception=True)
        unknown = set(parameters or {}) - set(serializer.fields)
        if unknown:
            raise serializers.ValidationError({name: ["Unknown parameter."] for name in sorted(unknown)})
        if policy is not None and policy.scope not in self.scopes:
            allowed = ", ".join(self.scopes)
            raise serializers.ValidationError({"scope": [f"{self.label or self.name} policies act on: {allowed}."]})
        checked = self.check_scope(dict(serializer.validated_data), nodes=nodes)
        return checked if policy is None else self.check_target(checked, policy=policy)

    def check_scope(self, parameters: dict, *, nodes) -> dict:
        return parameters

    def check_target(self, parameters: dict, *, policy) -> dict:
        """The parameters judged against what the policy names (its scope kind, its service); keyed by the field."""
        return parameters

    def propose(self, policy, *, source, now: float, exclude: set[str]) -> tuple[Proposal | None, str]:
        """A proposal from the telemetry (nodes in `exclude` are left alone), or None with the reason there is none."""
        raise NotImplementedError

    def undo_reason(self, policy, action, *, source, now: float) -> str:
        """Why an applied action should be reverted now (the load rose), or "" to keep it."""
        return ""

    def job_parameters(self, action, *, mode: str) -> dict:
        raise NotImplementedError

    def enact(self, action, *, mode: str) -> str:
        """A kind without a job: record `mode` ("apply" or "revert") of the action now; returns what it did."""
        raise NotImplementedError

    def guarded_hostnames(self, action) -> list[str]:
        """The nodes whose latency SLOs must have headroom before the action is applied."""
        return action.hostnames

    def artefacts(self, action) -> list:
        """The files (apps.deployments.artefacts.base.Artefact) an operator applies to a real cluster, validated."""
        return []

    def survey(self, policy) -> tuple[str, dict] | None:
        """(node, job parameters) of the job whose findings propose() reads, for a kind that looks on a node before
        it proposes (storage tiering); None: propose() reads the telemetry."""
        return None

    def survey_due(self, policy) -> bool:
        """Whether the evaluation should start a survey now (none running, the newest too old to propose from)."""
        return False


def with_unit(value, unit: str) -> str:
    """A parameter's value as the pages write it: 30.0 with % is "30 %", 1 with days "1 day"."""
    text = f"{value:g}" if isinstance(value, float) else str(value)
    if not unit:
        return text
    if value == 1 and unit.isalpha() and unit.endswith("s") and len(unit) > 1:
        unit = unit[:-1]  # "1 day", "1 file"
    return f"{text} {unit}"


POLICY_KINDS: dict[str, PolicyKindSpec] = {}


def register_policy_kind(cls: type[PolicyKindSpec]) -> type[PolicyKindSpec]:
    POLICY_KINDS[cls.name] = cls()
    return cls


def policy_kind(name: str) -> PolicyKindSpec:
    try:
        return POLICY_KINDS[name]
    except KeyError:
        raise LookupError(f"unknown policy kind {name!r}") from None


# The services record proposals; a job whose findings a proposal reads (a survey) asks for one when it has them,
# through this hook: the jobs may not import the services that start them.
_proposal_recorder: Callable | None = None


def set_proposal_recorder(recorder: Callable) -> None:
    global _proposal_recorder
    _proposal_recorder = recorder


def record_proposal(policy) -> tuple:
    """(the PolicyAction proposed from what `policy` can read now, "") or (None, why not): services.dry_run."""
    if _proposal_recorder is None:
        raise LookupError("no proposal recorder: import apps.costs.services")
    return _proposal_recorder(policy)
