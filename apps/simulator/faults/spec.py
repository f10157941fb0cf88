"""The shape of a fault kind's registry entry, and the error a fault that cannot apply raises."""

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field

from apps.simulator.choices import FaultKind
from apps.simulator.state import SimulatedNode


class FaultError(ValueError):
    """A fault that cannot be applied to this node; `field` names what is wrong, `detail` every problem with it: its
    messages, or for the parameters, each bad parameter's messages by its name."""

    def __init__(self, field: str, message: str, *, detail: list[str] | dict[str, list[str]] | None = None):
        super().__init__(message)
        self.field = field
        self.detail = detail or [message]


class Target(ABC):
    """What a fault applies to (a GPU index, a data NIC, ...): its default on a node, and whether a node has it."""

    label = ""

    def default(self, state: SimulatedNode) -> str:
        return ""  # the whole node

    @abstractmethod
    def check(self, state: SimulatedNode, kind: str, target: str) -> None:
        """Raise FaultError("target", ...) when the node has no such target."""


@dataclass(frozen=True)
class Parameter:
    """A whole-number parameter of a fault kind, with the value it takes when not given."""

    default: int
    low: int
    high: int

    def check(self, value) -> int:
        """The value; ValueError saying what it must be (its name is the caller's to give)."""
        if isinstance(value, bool) or not isinstance(value, int) or not self.low <= value <= self.high:
            raise ValueError(f"Must be a whole number from {self.low} to {self.high}, not {value!r}.")
        return value


@dataclass(frozen=True)
class FaultSpec:
    """One fault kind. `value` is what SimFault.kind stores (its label, and its effects on
    a training job, are the enum's: apps/simulator/choices.py); `apply` changes a node's state the way the real fault
    changes what the tools print; `fixed_by` gives the change key (a '*' matches any NIC) of a command that repairs
    the fault, such as `ip link set mtu 9000`, or None when only clearing the fault does; `sentence` names one
    fault of the kind, as in "MTU 1500 on ens1np0"."""

    value: FaultKind
    colour: str  # of the badge: red takes the node out of work, orange degrades it
    target: Target
    apply: Callable[[SimulatedNode, str, dict], None]
    sentence: Callable[[str, dict], str]
    parameters: dict[str, Parameter] = field(default_factory=dict)
    fixed_by: Callable[[str], str] | None = None
    domain_wide: bool = False  # every tray of the node's NVLink domain shows it (a switch tray, the IMEX domain)

    @property
    def label(self) -> str:
        return self.value.label

    def check_parameters(self, parameters) -> dict:
        """The parameters with defaults filled in; FaultError("parameters") naming every unknown name and value out
        of bounds, each under its parameter's name."""
        if not isinstance(parameters, dict):
            raise FaultError("parameters", 'parameters are a JSON object, e.g. {"mtu": 1500}.')
        problems: dict[str, list[str]] = {}
        checked = {}
        takes = ", ".join(sorted(self.parameters)) or "no parameters"
        for name in sorted(set(parameters) - set(self.parameters)):
            problems[name] = [f"A {self.value} fault takes {takes}, not {name}."]
        for name, spec in self.parameters.items():
            try:
                checked[name] = spec.check(parameters.get(name, spec.default))
            except ValueError as error:
                problems[name] = [str(error)]
        if problems:
            message = " ".join(f"{name}: {' '.join(messages)}" for name, messages in problems.items())
            raise FaultError("parameters", message, detail=problems)
        return checked

    def describe(self, target: str, parameters: dict) -> str:
        """The sentence naming one fault of this kind; stored parameters missing a name read as its default."""
        defaults = {name: spec.default for name, spec in self.parameters.items()}
        return self.sentence(target, {**defaults, **(parameters or {})})
