"""The benchmark tests that crossed a switch's ports: the switch page's "Benchmarks across these ports" section.

A multi-node NCCL test sends its traffic out of every host's data NICs, so it crosses the leaf port each of those NICs
is cabled to; it crosses the spine layer when its hosts sit under more than one leaf (which spine carried which flow
ECMP decides, so a spine's port to a leaf is credited with every cross-leaf test that had a host under that leaf), and
in a three-tier fabric the core when its hosts sit in more than one pod (leaf, spine, core, spine, leaf).
A test inside one node stays on NVLink and crosses no port. A sweep's suspect names its switch and port: those rows
are marked.
"""

from dataclasses import dataclass, field

from django.db.models import Q

from apps.benchmarks.choices import VERDICT_COLOURS, Verdict
from apps.benchmarks.models import BenchmarkTest, Suspect
from apps.inventory.choices import SwitchTier
from apps.inventory.fabric import switch_ports
from apps.inventory.models import Cable, Switch

RECENT_TESTS = 2000  # the newest multi-node tests looked at: what an operator reads a port's recent history from
WORST_FIRST = [Verdict.FAIL, Verdict.WARN, Verdict.COULD_NOT_RUN, Verdict.PASS]


@dataclass
class PortCrossings:
    port: str
    far: str  # "gpu001:ens1np0" for a node's NIC, the leaf's name for a spine's downlink
    hostnames: frozenset[str]
    tests: list[BenchmarkTest] = field(default_factory=list)  # newest first
    suspects: list[Suspect] = field(default_factory=list)

    @property
    def last(self) -> BenchmarkTest | None:
        return self.tests[0] if self.tests else None

    @property
    def worst(self) -> str:
        verdicts = {test.verdict for test in self.tests}
        return next((verdict for verdict in WORST_FIRST if verdict in verdicts), "")

    def counts(self) -> list[tuple[str, str, int]]:
        """(verdict, its colour, how many tests had it), worst first."""
        counted = {verdict: 0 for verdict in WORST_FIRST}
        for test in self.tests:
            counted[test.verdict] += 1
        return [(verdict, VERDICT_COLOURS[verdict], count) for verdict, count in counted.items() if count]


def _leaf_hosts(leaves: set[int]) -> dict[int, set[str]]:
    """Per leaf switch (by pk), the host names of the nodes whose NICs are cabled to it."""
    hosts: dict[int, set[str]] = {pk: set() for pk in leaves}
    cables = Cable.objects.filter(
        Q(a_switch__in=leaves, b_nic__isnull=False) | Q(b_switch__in=leaves, a_nic__isnull=False)
    )
    for a_switch, b_switch, a_host, b_host in cables.values_list(
        "a_switch_id", "b_switch_id", "a_nic__node__hostname", "b_nic__node__hostname"
    ):
        if a_switch in hosts and b_host:
            hosts[a_switch].add(b_host)
        if b_switch in hosts and a_host:
            hosts[b_switch].add(a_host)
    return hosts


def _spine_hosts(spines: set[int]) -> dict[int, set[str]]:
    """Per spine switch (by pk), the host names under the leaves cabled to it: in three tiers, its pod."""
    leaves_of: dict[int, set[int]] = {pk: set() for pk in spines}
    for leaf, spine in Cable.objects.filter(a_switch__tier=SwitchTier.LEAF, b_switch__in=spines).values_list(
        "a_switch_id", "b_switch_id"
    ):
        leaves_of[spine].add(leaf)
    under = _leaf_hosts(set().union(*leaves_of.values()))
    return {spine: set().union(*(under[leaf] for leaf in leaves)) for spine, leaves in leaves_of.items()}


# The tier a switch's downlinks lead to, and how to find the hosts beneath each of them.
BELOW = {SwitchTier.SPINE: (SwitchTier.LEAF, _leaf_hosts), SwitchTier.CORE: (SwitchTier.SPINE, _spine_hosts)}


def switch_crossings(switch: Switch) -> list[PortCrossings]:
    """One row per cabled port, with the recent multi-node tests that crossed it, newest first. A spine's downlink
    carries the tests whose hosts sat under more than one of its leaves; a core's downlink (and a spine's uplink to
    the core) those whose hosts sat in more than one pod."""
    rows: list[PortCrossings] = []
    downlinks: dict[str, int] = {}  # port -> the switch below it leads to (a spine's or a core's view)
    uplinks: set[str] = set()  # a three-tier spine's ports to the core
    below, hosts_below = BELOW.get(switch.tier, (None, None))
    group_of: dict[str, int] = {}
    for row in switch_ports(switch).rows:
        if row.far.nic is not None:
            rows.append(
                PortCrossings(
                    row.port, f"{row.far.node.hostname}:{row.far.nic.name}", frozenset({row.far.node.hostname})
                )
            )
        elif row.far.switch is not None and below and row.far.switch.tier == below:
            downlinks[row.port] = row.far.switch.pk
            rows.append(PortCrossings(row.port, row.far.switch.name, frozenset()))
        elif row.far.switch is not None and switch.tier == SwitchTier.SPINE and row.far.switch.tier == SwitchTier.CORE:
            uplinks.add(row.port)
            rows.append(PortCrossings(row.port, row.far.switch.name, frozenset()))
    pod: set[str] = set()
    if downlinks or uplinks:
        under = hosts_below(set(downlinks.values())) if downlinks else {}
        group_of = {host: group for group, hosts in under.items() for host in hosts}
        pod = _spine_hosts({switch.pk})[switch.pk] if uplinks else set()
        rows = [
            PortCrossings(row.port, row.far, frozenset(under[downlinks[row.port]]))
            if row.port in downlinks
            else PortCrossings(row.port, row.far, frozenset(pod))
            if row.port in uplinks
            else row
            for row in rows
        ]
    if not any(row.hostnames for row in rows):
        return rows
    tests = BenchmarkTest.objects.select_related("run", "job").filter(hosts_key__contains=",").order_by("-created")
    for test in tests[:RECENT_TESTS]:
        hosts = set(test.hosts)
        crosses_below = len({group_of[host] for host in hosts if host in group_of}) > 1
        for row in rows:
            if not row.hostnames & hosts:
                continue
            if row.port in downlinks and not crosses_below:
                continue
            if row.port in uplinks and hosts <= pod:
                continue
            row.tests.append(test)
    by_port = {row.port: row for row in rows}
    for suspect in Suspect.objects.select_related("run", "node").filter(switch=switch.name).order_by("-created"):
        if suspect.switch_port in by_port:
            by_port[suspect.switch_port].suspects.append(suspect)
    return rows


def switch_section(switch: Switch, request) -> dict:
    rows = switch_crossings(switch)
    return {"switch": switch, "rows": [row for row in rows if row.tests or row.suspects], "ports": len(rows)}
