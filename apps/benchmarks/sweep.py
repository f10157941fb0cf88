"""The sweep's plan: which tests run in each round, from what the earlier rounds found. Pure Python, no database.

Halving: round 1 tests the whole set together (a set larger than one test may hold, `max_group`: its halves, or
their halves, each within it; one round fewer per halving). A group that tests bad is split into halves, both tested
in the next round (in parallel: groups of one round never share a node). A bad group of two — or a half of one
node — is split into its nodes, each tested against a known-good partner (a node of a group that tested good); a
node bad there is re-tested once, after the cool-down, against a *different* known-good partner, and named a suspect
only when that re-test is bad too. While no node is known good yet (a small set), waiting nodes are first probed in
pairs not tested together before, to find partners. One bad node among N ≥ 4 is so named in 1 + (⌈log₂N⌉ − 1) + 1 + 1
rounds, within 2⌈log₂N⌉ + 1.

Pairwise (small sets): every pair once, in rounds of disjoint pairs (the circle method); pairs that test bad are
re-tested once after the cool-down; a node is a suspect when most of its pairs stay bad.
"""

import math
from dataclasses import dataclass, field
from itertools import combinations

from apps.benchmarks.choices import Purpose


def round_bound(nodes: int) -> int:
    """The most rounds a sweep of `nodes` may take to name one bad node: 2⌈log₂N⌉ + 1."""
    return 2 * math.ceil(math.log2(max(nodes, 2))) + 1


@dataclass(frozen=True)
class PlannedTest:
    """One test of a round: `hosts` together (the launcher first); `subject` is the node under test against
    `partner` (isolate, confirm), else empty."""

    hosts: tuple[str, ...]
    purpose: str
    subject: str = ""
    partner: str = ""

    @property
    def launcher(self) -> str:
        return self.hosts[0]


@dataclass
class _Item:
    kind: str  # "group" | "isolate" | "confirm" | "probe"
    hosts: tuple[str, ...] = ()
    node: str = ""
    avoid: frozenset = frozenset()
    first: dict = field(default_factory=dict)  # the isolate result a confirm re-tests


@dataclass
class Outcome:
    """What a finished test said: bad or not, and the figures kept as evidence."""

    bad: bool
    busbw_gb_per_s: float | None = None
    verdict: str = ""


class HalvingSweep:
    """Plans rounds one at a time: call next_round(), run its tests, record() each, until done."""

    def __init__(self, hosts: list[str], max_group: int | None = None):
        if len(hosts) < 2:
            raise ValueError("a sweep needs at least two nodes")
        if max_group is not None and max_group < 2:
            raise ValueError("a test must hold at least two nodes")
        self.hosts = list(hosts)
        self.known_good: list[str] = []  # in the order they were found good
        self.suspects: dict[str, dict] = {}  # node -> {"isolate": {...}, "confirm": {...}}
        self.cleared: list[str] = []  # bad against one partner, good on the re-test: not named
        self.unresolved: list[str] = []  # no known-good partner was left to test them against
        self.rounds = 0
        self._pending: list[_Item] = [_Item("group", hosts=part) for part in _halved(tuple(hosts), max_group)]
        self._running: dict[PlannedTest, _Item] = {}
        self._tried: set[frozenset] = set()  # pairs already tested together

    @property
    def done(self) -> bool:
        return not self._pending and not self._running

    def next_round(self) -> list[PlannedTest]:
        """The tests of the next round (disjoint nodes); [] when done."""
        busy: set[str] = set()
        tests, deferred = [], []
        for item in self._pending:
            if item.kind == "group":
                purpose = Purpose.WHOLE if len(item.hosts) == len(self.hosts) else Purpose.HALF
                test = PlannedTest(item.hosts, purpose)
                busy.update(item.hosts)
            else:
                partner = next((node for node in self.known_good if node not in busy and node not in item.avoid), None)
                if partner is None:
                    deferred.append(item)
                    continue
                purpose = Purpose.ISOLATE if item.kind == "isolate" else Purpose.CONFIRM
                test = PlannedTest((item.node, partner), purpose, subject=item.node, partner=partner)
                busy.update(test.hosts)
            tests.append(test)
            self._running[test] = item
        if not tests and deferred:  # no known-good partner yet: probe the waiting nodes against each other
            tests = self._probes(deferred)
            if not tests:  # every pair of them was tried: nothing can be confirmed
                self.unresolved += [item.node for item in deferred]
                deferred = []
        self._pending = deferred
        if tests:
            self.rounds += 1
        return tests

    def _probes(self, deferred: list[_Item]) -> list[PlannedTest]:
        """Disjoint pairs of waiting nodes not yet tested together; a pair that tests good gives two partners."""
        waiting = sorted({item.node for item in deferred if item.kind == "isolate"})
        busy: set[str] = set()
        tests = []
        for a, b in combinations(waiting, 2):
            if a in busy or b in busy or frozenset((a, b)) in self._tried:
                continue
            test = PlannedTest((a, b), Purpose.PAIR)
            self._running[test] = _Item("probe", hosts=(a, b))
            busy |= {a, b}
            tests.append(test)
        return tests

    def needs_cooldown(self, tests: list[PlannedTest]) -> bool:
        return any(test.purpose == Purpose.CONFIRM for test in tests)

    def record(self, test: PlannedTest, outcome: Outcome) -> None:
        item = self._running.pop(test)
        if len(test.hosts) == 2:
            self._tried.add(frozenset(test.hosts))
        if item.kind == "probe":
            if not outcome.bad:
                self.known_good += [host for host in item.hosts if host not in self.known_good]
                self._pending = [
                    waiting
                    for waiting in self._pending
                    if not (waiting.kind == "isolate" and waiting.node in item.hosts)
                ]
        elif item.kind == "group":
            if not outcome.bad:
                self.known_good += [host for host in item.hosts if host not in self.known_good]
                return
            if len(item.hosts) == 2:
                self._pending += [_Item("isolate", node=host) for host in item.hosts]
                return
            middle = len(item.hosts) // 2
            for half in (item.hosts[:middle], item.hosts[middle:]):
                self._pending.append(_Item("group", hosts=half) if len(half) > 1 else _Item("isolate", node=half[0]))
        elif item.kind == "isolate":
            if outcome.bad:
                first = {"partner": test.partner, "busbw_gb_per_s": outcome.busbw_gb_per_s, "verdict": outcome.verdict}
                self._pending.append(_Item("confirm", node=item.node, avoid=frozenset({test.partner}), first=first))
            elif item.node not in self.known_good:
                self.known_good.append(item.node)
        else:
            confirm = {"partner": test.partner, "busbw_gb_per_s": outcome.busbw_gb_per_s, "verdict": outcome.verdict}
            if outcome.bad:
                self.suspects[item.node] = {"isolate": item.first, "confirm": confirm}
            else:
                self.cleared.append(item.node)


def _halved(hosts: tuple[str, ...], max_group: int | None) -> list[tuple[str, ...]]:
    """The set, else its halves (their halves, ...) until each holds at most max_group nodes, in order."""
    if max_group is None or len(hosts) <= max_group:
        return [hosts]
    middle = len(hosts) // 2
    return _halved(hosts[:middle], max_group) + _halved(hosts[middle:], max_group)


def pairwise_rounds(hosts: list[str]) -> list[list[tuple[str, str]]]:
    """Every pair once, in rounds of disjoint pairs (the circle method: N−1 rounds for even N, N for odd)."""
    players = list(hosts) + ([""] if len(hosts) % 2 else [])
    count = len(players)
    rounds = []
    for _ in range(count - 1):
        pairs = [(players[i], players[count - 1 - i]) for i in range(count // 2)]
        rounds.append([tuple(sorted(pair)) for pair in pairs if "" not in pair])
        players = [players[0], players[-1], *players[1:-1]]
    assert sum(len(pairs) for pairs in rounds) == len(list(combinations(hosts, 2)))
    return rounds


def pairwise_suspects(bad_pairs: set[tuple[str, str]], hosts: list[str]) -> list[str]:
    """Nodes most of whose pairs stayed bad after the re-test."""
    suspects = []
    for host in hosts:
        pairs = [pair for pair in combinations(sorted(hosts), 2) if host in pair]
        bad = sum(1 for pair in pairs if pair in bad_pairs)
        if pairs and bad * 2 > len(pairs):
            suspects.append(host)
    return suspects
