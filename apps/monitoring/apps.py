from django.apps import AppConfig


class MonitoringConfig(AppConfig):
    name = "apps.monitoring"
    label = "monitoring"
    verbose_name = "Monitoring"

    def ready(self) -> None:
        # Registers the `bmc-poll` job kind.
        from apps.monitoring import kinds  # noqa: F401
