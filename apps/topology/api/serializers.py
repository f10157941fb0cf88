"""Read-only shapes of the topology API: the graph (nodes, switches, links with their cables) and rule results."""

from rest_framework import serializers

from apps.inventory.choices import NodeRole, NodeStatus, Plane, SwitchTier
from apps.topology.choices import Verdict
from apps.topology.graph import ClusterGraph

LINK_KINDS = [("access", "Node to switch"), ("fabric", "Switch to switch"), ("direct", "Node to node")]


class TopologyNodeSerializer(serializers.Serializer):
    id = serializers.CharField(help_text="Vertex id used by links: 'node:<hostname>'.")
    hostname = serializers.CharField()
    role = serializers.ChoiceField(choices=NodeRole.choices)
    status = serializers.ChoiceField(choices=NodeStatus.choices)
    rack = serializers.CharField(allow_blank=True)
    gpu_count = serializers.IntegerField()


class TopologySwitchSerializer(serializers.Serializer):
    id = serializers.CharField(help_text="Vertex id used by links: 'switch:<name>'.")
    name = serializers.CharField()
    plane = serializers.ChoiceField(choices=Plane.choices)
    tier = serializers.ChoiceField(choices=SwitchTier.choices)
    rack = serializers.CharField(allow_blank=True)


class TopologyCableSerializer(serializers.Serializer):
    cable_id = serializers.UUIDField(help_text="The cable's public id in the inventory.")
    a = serializers.CharField(help_text="End A: 'host:nic' or 'switch:port'.")
    b = serializers.CharField(help_text="End B: 'host:nic' or 'switch:port'.")
    speed_gbps = serializers.IntegerField(help_text="The slowest of the cable and the NICs at its ends.")
    up = serializers.BooleanField(help_text="False when a NIC end reports its link down.")
    plane = serializers.CharField(allow_blank=True)
    medium = serializers.CharField()


class TopologyLinkSerializer(serializers.Serializer):
    a = serializers.CharField(help_text="Vertex id of one end.")
    b = serializers.CharField(help_text="Vertex id of the other end.")
    kind = serializers.ChoiceField(choices=LINK_KINDS)
    plane = serializers.CharField(help_text="The plane of the cables, or 'mixed'.")
    medium = serializers.CharField(help_text="The medium of the cables, or 'mixed'.")
    capacity_gbps = serializers.IntegerField(help_text="Summed speed of the cables that are up.")
    installed_gbps = serializers.IntegerField(help_text="Summed speed of every cable.")
    cables = TopologyCableSerializer(many=True)


class TopologyGraphSerializer(serializers.Serializer):
    nodes = TopologyNodeSerializer(many=True)
    switches = TopologySwitchSerializer(many=True)
    links = TopologyLinkSerializer(many=True)


class TopologySummarySerializer(serializers.Serializer):
    nodes = serializers.IntegerField()
    compute_nodes = serializers.IntegerField()
    management_nodes = serializers.IntegerField()
    switches = serializers.IntegerField()
    links = serializers.IntegerField(help_text="Aggregated links: one per pair of connected elements.")
    cables = serializers.IntegerField()
    capacity_gbps_by_plane = serializers.DictField(child=serializers.IntegerField())
    up_capacity_gbps_by_plane = serializers.DictField(child=serializers.IntegerField())


class TopologyRuleSerializer(serializers.Serializer):
    name = serializers.SlugField()
    title = serializers.CharField()
    verdict = serializers.ChoiceField(choices=Verdict.choices)
    passed = serializers.BooleanField()
    detail = serializers.CharField()
    offending = serializers.ListField(
        child=serializers.CharField(), help_text="Hostnames, switch names, 'host:nic', 'host GPUn' or tier names."
    )
    offending_count = serializers.IntegerField(help_text="All elements named; 'offending' lists the first 50.")
    figures = serializers.DictField(
        child=serializers.JSONField(), help_text="The rule's figures (thresholds, per element)."
    )
    links = serializers.ListField(
        child=serializers.ListField(child=serializers.CharField(), min_length=2, max_length=2),
        help_text="Links the rule names, as pairs of vertex ids.",
    )


class TopologyRulesSerializer(serializers.Serializer):
    passed = serializers.BooleanField(help_text="Every rule passed.")
    rules = TopologyRuleSerializer(many=True)


class TopologyReportSerializer(TopologyRulesSerializer):
    summary = TopologySummarySerializer()
    graph = TopologyGraphSerializer()
    elapsed_ms = serializers.FloatField()


def graph_data(cluster: ClusterGraph) -> dict:
    """The graph as plain data for TopologyGraphSerializer."""
    nodes = [
        {
            "id": node.key,
            "hostname": node.hostname,
            "role": node.role,
            "status": node.status,
            "rack": node.rack,
            "gpu_count": node.gpu_count,
        }
        for node in cluster.nodes.values()
    ]
    switches = [
        {"id": switch.key, "name": switch.name, "plane": switch.plane, "tier": switch.tier, "rack": switch.rack}
        for switch in cluster.switches.values()
    ]
    links = [
        {
            "a": u,
            "b": v,
            "kind": data["kind"],
            "plane": data["plane"],
            "medium": data["medium"],
            "capacity_gbps": data["capacity_gbps"],
            "installed_gbps": data["installed_gbps"],
            "cables": data["cables"],
        }
        for u, v, data in sorted(cluster.edges(), key=lambda edge: (edge[0], edge[1]))
    ]
    return {"nodes": nodes, "switches": switches, "links": links}
