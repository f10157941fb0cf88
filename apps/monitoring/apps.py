from django.apps import AppConfig


class MonitoringConfig(AppConfig):
    name = "apps.monitoring"
    label = "monitoring"
    verbose_name = "Monitoring"

    def ready(self) -> None:
        # Registers the `bmc-poll` job kind, and the node page's BMC section.
        from apps.inventory.node_panels import register_node_panel
        from apps.monitoring import kinds  # noqa: F401
        from apps.monitoring.panels import node_bmc_context

        register_node_panel(name="bmc", template="monitoring/partials/node_bmc.html", context=node_bmc_context)
