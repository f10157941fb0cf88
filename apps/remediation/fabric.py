"""Where nodes sit in the fabric, as remediation needs it: the leaf switch a set of nodes shares (the breaker's
"suspect the switch", a repair's known-good partner on the same leaf)."""

from django.db.models import Q

from apps.inventory.choices import SwitchTier
from apps.inventory.models import Cable, Node


def shared_leaf(nodes: list[Node]) -> str:
    """The leaf switch every node is cabled to (Node → NIC → Cable → Switch), or "" when they share none."""
    leaves: dict[int, set[str]] = {node.pk: set() for node in nodes}
    cables = Cable.objects.filter(
        Q(a_nic__node__in=nodes, b_switch__tier=SwitchTier.LEAF)
        | Q(b_nic__node__in=nodes, a_switch__tier=SwitchTier.LEAF)
    ).select_related("a_nic", "b_nic", "a_switch", "b_switch")
    for cable in cables:
        nic, switch = (
            (cable.a_nic, cable.b_switch) if cable.a_nic_id and cable.b_switch_id else (cable.b_nic, cable.a_switch)
        )
        if nic is not None and switch is not None and nic.node_id in leaves:
            leaves[nic.node_id].add(switch.name)
    common = set.intersection(*leaves.values()) if leaves else set()
    return ", ".join(sorted(common))
