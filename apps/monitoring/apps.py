from django.apps import AppConfig


class MonitoringConfig(AppConfig):
    name = "apps.monitoring"
    label = "monitoring"
    verbose_name = "Monitoring"

    def ready(self) -> None:
        # Registers the job kinds (`bmc-poll`, `business-validation`, `training-progress`), the dashboard's panels,
        # the node page's BMC section, the racks' measured draw and their coolant loops' readings.
        from apps.health.costs import register_slo_burn
        from apps.inventory.dashboard import register_panel
        from apps.inventory.power import register_measured_annotation, register_measured_source
        from apps.inventory.rackscale import register_coolant_source
        from apps.inventory.sections import NODE_PAGE
        from apps.monitoring import failure_slo, gpuhours, health, kinds, services, signals  # noqa: F401
        from apps.monitoring.panels import loops_coolant, node_bmc_context, rack_measured_w, racks_power

        signals.connect()
        register_slo_burn(failure_slo.slo_burn)  # a failure's SLO budget burned (apps/health/costs.py)
        register_panel(
            name="telemetry-health",
            template="monitoring/partials/health_panel.html",
            context=services.telemetry_health,
        )
        register_panel(
            name="fleet-health", template="monitoring/partials/fleet_health.html", context=health.dashboard_panel
        )
        register_panel(
            name="gpu-hours", template="monitoring/partials/gpu_hours_panel.html", context=gpuhours.dashboard_panel
        )
        register_measured_source(racks_power)
        register_measured_annotation(rack_measured_w)
        register_coolant_source(loops_coolant)  # the rack page's coolant loops, now
        NODE_PAGE.register(name="bmc", template="monitoring/partials/node_bmc.html", context=node_bmc_context)
