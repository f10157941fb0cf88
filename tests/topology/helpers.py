"""Helpers shared by the topology tests: find a rule in a report, break the demo cluster in known ways."""

from apps.inventory.choices import Plane
from apps.inventory.models import Cable, Nic
from apps.topology.rules import RuleResult
from apps.topology.services import TopologyReport

R01_NODES = [f"gpu{n:03d}" for n in range(1, 9)]


def rule(report: TopologyReport, name: str) -> RuleResult:
    return next(result for result in report.rules if result.name == name)


def verdicts(report: TopologyReport) -> dict[str, str]:
    return {result.name: result.verdict for result in report.rules}


def delete_leaf_uplinks(leaf: str) -> int:
    """Remove every cable between the leaf and a spine; returns how many went."""
    deleted, _ = Cable.objects.filter(a_switch__name=leaf, b_switch__isnull=False).delete()
    return deleted


def unplug_plane(hostname: str, plane: str = Plane.B) -> int:
    """Remove the cables of the node's data NICs on the plane."""
    deleted, _ = Cable.objects.filter(a_nic__node__hostname=hostname, a_nic__plane=plane).delete()
    return deleted


def nic(hostname: str, name: str) -> Nic:
    return Nic.objects.get(node__hostname=hostname, name=name)
