"""What every deployment step is: a small class that says which commands read the node's state (check and verify
run the same reads), how those readings are judged against the plan's criteria, and which commands change the node
(apply), only for what the check found wrong, so applying twice changes nothing.

The classes are pure: they see a NodeContext (plain values read from the inventory before the fan-out) and command
outputs, never the database, so the dry run, the runner and the tests all use the same code.
"""

import base64
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from apps.deployments.choices import OUTCOME_RANK, VERIFIED_OUTCOMES, Comparator, Outcome, Phase, Problem
from apps.deployments.options import PLAN_DEFAULTS
from apps.nodeexec import catalogue
from apps.parsers.errors import ParseError


@dataclass(frozen=True)
class Nic:
    name: str
    speed_gbps: int
    rdma_device: str = ""
    mac: str = ""
    peer: str = ""  # the cable's other end in the inventory ("leaf-r04-a port swp10"), "" when not cabled


@dataclass(frozen=True)
class InventoryGpu:
    index: int
    uuid: str
    serial: str


@dataclass(frozen=True)
class NodeContext:
    """One node as the plan sees it: inventory facts, the plan's options and criteria, rendered artefacts."""

    hostname: str
    node_id: int | None
    sku: str
    gpu_count: int
    hbm_reference_gb_per_s: float
    hbm_datasheet_gb_per_s: float
    nvlink_gb_per_s: int
    pcie_gen: int
    data_nics: tuple[Nic, ...]
    options: dict
    criteria: dict
    files: dict = field(default_factory=dict)  # path -> content this node should have (artefacts)
    topology: tuple = ()  # (rule title, verdict, detail) for rules that name this node
    gpus: tuple[InventoryGpu, ...] = ()  # what the inventory holds about each GPU

    @property
    def rdma_nics(self) -> tuple[Nic, ...]:
        return tuple(nic for nic in self.data_nics if nic.rdma_device)

    def option(self, section: str, name: str):
        """The plan's value, or the plan's default where the stored options lack it."""
        return (self.options.get(section) or {}).get(name, PLAN_DEFAULTS[section][name])


@dataclass(frozen=True)
class Call:
    """One catalogue command with its placeholder values: what the dry run prints and the runner runs."""

    command: str
    values: tuple = ()  # ((name, value), ...) so a Call is hashable
    key: str = ""  # how the step finds this call's output

    def argv(self) -> list[str]:
        return catalogue.build(self.command, **dict(self.values))

    def text(self) -> str:
        return catalogue.shell_join(self.argv())

    def timeout(self) -> float:
        return catalogue.get_command(self.command).timeout

    def display(self) -> str:
        """The command as an operator reads it: exact, plus what a file write writes (its content is base64)."""
        if self.command != "write-file":
            return self.text()
        values = dict(self.values)
        content = base64.b64decode(values["base64"]).decode("utf-8", errors="replace")
        lines = content.splitlines()
        what = repr(lines[0]) if len(lines) == 1 else f"{len(lines)} lines"
        return f"{self.text()}  # writes {what} to {values['path']}"


def call(command: str, key: str = "", **values) -> Call:
    return Call(command, tuple(sorted(values.items())), key or command)


@dataclass
class Output:
    """What one read command gave back."""

    ok: bool
    text: str
    reason: str = ""  # why it could not run, when not ok


@dataclass
class Finding:
    """One judged fact: a check on a subject (a GPU, a NIC, the node) with the criterion it was judged by."""

    check: str
    outcome: str
    criterion: str
    subject: str = ""
    value: str = ""
    expected: str = ""
    threshold: float | None = None
    reference: float | None = None
    reference_label: str = ""
    unit: str = ""
    evidence: str = ""
    problem: Problem | Literal[""] = ""  # the known problem a failure points to (suggestions key on it)
    attempts: int = 1

    def __post_init__(self) -> None:
        if self.problem:
            self.problem = Problem(self.problem)  # a problem that is not a Problem is a bug: ValueError here

    @property
    def passed(self) -> bool:
        return self.outcome in VERIFIED_OUTCOMES

    def as_json(self) -> dict:
        return {key: value for key, value in self.__dict__.items() if value not in ("", None)}


class CouldNotRun(Exception):
    """A reading the judgement needs is missing or not understood."""


def worst(findings: list[Finding]) -> str:
    if not findings:
        return Outcome.COULD_NOT_RUN
    return max((finding.outcome for finding in findings), key=lambda outcome: OUTCOME_RANK[Outcome(outcome)])


def equal(check: str, subject: str, value, expected, *, what: str, problem: Problem, evidence: str = "") -> Finding:
    passed = str(value) == str(expected)
    return Finding(
        check=check,
        subject=subject,
        outcome=Outcome.PASS if passed else Outcome.FAIL,
        value=str(value),
        expected=str(expected),
        criterion=f"{what} equal to {expected}",
        evidence=evidence,
        problem="" if passed else problem,
    )


def measured(
    check: str, subject: str, value: float, criterion: dict, *, problem: Problem, evidence: str = ""
) -> Finding:
    """Judge a figure against a criterion: thresholds absolute or a percentage of a reference, pass/warn/fail."""
    reference = criterion.get("reference_value")
    scale = reference / 100 if reference else 1.0
    threshold = criterion["threshold"] * scale
    warn = criterion.get("warn_threshold")
    warn = warn * scale if warn is not None else None
    comparator = criterion.get("comparator", Comparator.AT_LEAST)
    unit = criterion.get("unit", "")

    def meets(limit: float) -> bool:
        return value >= limit if comparator == Comparator.AT_LEAST else value <= limit

    outcome = Outcome.PASS if meets(threshold) else Outcome.WARN if warn is not None and meets(warn) else Outcome.FAIL
    words = Comparator(comparator).label
    if reference:
        what = criterion.get("reference") or "the reference"
        text = f"{words} {criterion['threshold']:g}% of {what} ({reference:g} {unit}) = {threshold:.1f} {unit}"
        if warn is not None:
            text += f"; warn from {criterion['warn_threshold']:g}%"
    else:
        text = f"{words} {threshold:g} {unit}" + (f"; warn from {warn:g} {unit}" if warn is not None else "")
    return Finding(
        check=check,
        subject=subject,
        outcome=outcome,
        value=f"{value:.1f} {unit}".strip(),
        criterion=text,
        threshold=threshold,
        reference=reference,
        reference_label=criterion.get("reference", "") if reference else "",
        unit=unit,
        evidence=evidence,
        problem="" if outcome != Outcome.FAIL else problem,
    )


class Step:
    """Subclass, set the class attributes, implement reads() and judge(); fixes() when the step can change things.

    `acceptance` steps only measure (no apply): a failing measurement is retried as its criterion says. `disruptive`
    steps (firmware flash, driver change, link changes) apply only on nodes an operator approved. `reboot_after_fix`
    steps take effect only at the next boot: the node is rebooted between the fix and the verify (approved with it).
    """

    name: ClassVar[str]
    label: ClassVar[str]
    phase: ClassVar[int] = Phase.ENVIRONMENT
    disruptive: ClassVar[bool] = False
    reboot_after_fix: ClassVar[bool] = False
    acceptance: ClassVar[bool] = False
    description: ClassVar[str] = ""
    retry_check: ClassVar[str] = ""  # the criterion whose retries/cool-down apply to this step

    def applies_to(self, node: NodeContext) -> bool:
        return True

    def reads(self, node: NodeContext) -> list[Call]:
        raise NotImplementedError

    def judge(self, node: NodeContext, outputs: dict[str, Output]) -> list[Finding]:
        raise NotImplementedError

    def fixes(self, node: NodeContext, findings: list[Finding] | None) -> list[Call]:
        """Commands that make the failing findings pass (None: everything the step may ever apply, for the dry
        run). Empty: nothing this step can change."""
        return []

    def could_not_run(self, reason: str) -> Finding:
        return Finding(check=self.name, outcome=Outcome.COULD_NOT_RUN, criterion=self.label, value=reason[:120])


def text_of(outputs: dict[str, Output], key: str) -> str:
    output = outputs.get(key)
    if output is None:
        raise CouldNotRun(f"{key} was not run")
    if not output.ok:
        raise CouldNotRun(output.reason)
    return output.text


def parse(outputs: dict[str, Output], key: str, parser):
    text = text_of(outputs, key)
    try:
        return parser(text)
    except ParseError as error:
        raise CouldNotRun(f"{key}: output not understood ({error})") from None


def excerpt(text: str, *needles: str, limit: int = 6) -> str:
    """The lines of an output that mention any needle (evidence), or its first lines."""
    lines = [line for line in text.splitlines() if any(needle in line for needle in needles)] if needles else []
    return "\n".join((lines or text.splitlines())[:limit])
