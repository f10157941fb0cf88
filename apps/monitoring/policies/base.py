"""What a policy kind is: its parameters (validated against the scope), how it proposes from the telemetry, and
when what it did should be undone. Kinds register themselves; CostPolicy.kind names one."""

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

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


class PolicyKindSpec:
    """Subclass, set the class attributes and implement the methods; register with @register_policy_kind."""

    name: ClassVar[str]
    label: ClassVar[str] = ""
    parameters: ClassVar[type[serializers.Serializer]]
    job_kind: ClassVar[str]  # the job kind that applies and reverts its actions
    enforces: ClassVar[bool] = True  # the evaluation re-applies an applied action a node may have forgotten
    guards_latency: ClassVar[bool] = True  # its actions slow nodes: held, and undone, while a latency SLO burns

    def check(self, parameters: dict, *, nodes) -> dict:
        """The validated parameters, or serializers.ValidationError keyed by parameter name; `nodes` is the scope."""
        serializer = self.parameters(data=parameters or {})
        serializer.is_valid(raise_exception=True)
        unknown = set(parameters or {}) - set(serializer.fields)
        if unknown:
            raise serializers.ValidationError({name: ["Unknown parameter."] for name in sorted(unknown)})
        return self.check_scope(dict(serializer.validated_data), nodes=nodes)

    def check_scope(self, parameters: dict, *, nodes) -> dict:
        return parameters

    def propose(self, policy, *, source, now: float, exclude: set[str]) -> tuple[Proposal | None, str]:
        """A proposal from the telemetry (nodes in `exclude` are left alone), or None with the reason there is none."""
        raise NotImplementedError

    def undo_reason(self, policy, action, *, source, now: float) -> str:
        """Why an applied action should be reverted now (the load rose), or "" to keep it."""
        return ""

    def job_parameters(self, action, *, mode: str) -> dict:
        raise NotImplementedError

    def survey(self, policy) -> tuple[str, dict] | None:
        """(node, job parameters) of the job whose findings propose() reads, for a kind that looks on a node before
        it proposes (storage tiering); None: propose() reads the telemetry."""
        return None

    def survey_due(self, policy) -> bool:
        """Whether the evaluation should start a survey now (none running, the newest too old to propose from)."""
        return False


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
        raise LookupError("no proposal recorder: import apps.monitoring.policies.services")
    return _proposal_recorder(policy)
