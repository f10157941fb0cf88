from django.apps import AppConfig


class DeploymentsConfig(AppConfig):
    name = "apps.deployments"
    label = "deployments"
    verbose_name = "Deployments"

    def ready(self) -> None:
        # Registers the `deploy` job kind and the commands its steps run.
        from apps.deployments import kinds, node_operations, reboot  # noqa: F401
