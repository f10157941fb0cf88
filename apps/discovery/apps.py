from django.apps import AppConfig


class DiscoveryConfig(AppConfig):
    name = "apps.discovery"
    label = "discovery"
    verbose_name = "Node discovery"

    def ready(self) -> None:
        # Registers the `discover` job kind and the fact commands it runs.
        from apps.discovery import kinds  # noqa: F401
