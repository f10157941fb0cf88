from django.apps import AppConfig


class HealthConfig(AppConfig):
    name = "apps.health"
    label = "health"
    verbose_name = "Health"

    def ready(self) -> None:
        # The dashboard's first panel, "What is wrong now" (apps/inventory/dashboard.py's registry), and the node and
        # switch pages' health sections (apps/inventory/sections.py).
        from apps.health import nvlink, panels, signals
        from apps.inventory.dashboard import register_panel
        from apps.inventory.sections import NODE_PAGE, RACK_PAGE, SWITCH_PAGE
        from apps.topology.nvlink import register_measured

        register_panel(
            name="what-is-wrong-now", template="health/partials/wrong_now.html", context=panels.wrong_now, first=True
        )
        NODE_PAGE.register(name="health", template="health/partials/events.html", context=panels.node_events)
        SWITCH_PAGE.register(name="health", template="health/partials/events.html", context=panels.switch_events)
        RACK_PAGE.register(name="health", template="health/partials/rack_events.html", context=panels.rack_events)
        # NVLink links measured down count in the topology's NVLink domain rule (apps/topology/nvlink.py).
        register_measured(nvlink.link_faults)
        # A GPU saved with a new presence gets the health that presence and its open events give (signals.py).
        signals.connect()
