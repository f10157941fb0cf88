from django.apps import AppConfig


class MonitoringConfig(AppConfig):
    name = "apps.monitoring"
    label = "monitoring"
    verbose_name = "Monitoring"

    def ready(self) -> None:
        from apps.inventory.dashboard import register_panel
        from apps.monitoring import services, signals

        signals.connect()
        register_panel(
            name="telemetry-health",
            template="monitoring/partials/health_panel.html",
            context=services.telemetry_health,
        )
