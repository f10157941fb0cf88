from django.apps import AppConfig


class TopologyConfig(AppConfig):
    name = "apps.topology"
    label = "topology"

    def ready(self) -> None:
        from apps.inventory.dashboard import register_panel
        from apps.topology import signals
        from apps.topology.services import rule_summary

        signals.connect()

        register_panel(
            name="topology-rules",
            template="topology/partials/rule_summary.html",
            context=lambda: {"rules": rule_summary()},
        )
