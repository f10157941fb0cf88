from django.apps import AppConfig


class DeploymentsConfig(AppConfig):
    name = "apps.deployments"
    label = "deployments"
    verbose_name = "Deployments"

    def ready(self) -> None:
        # Registers the `deploy`, `scheduler-action` and `reboot` job kinds, the commands their steps run, and the
        # node page's Reboot section.
        from apps.deployments import kinds, node_operations, reboot  # noqa: F401
        from apps.deployments.views import node_reboot_context
        from apps.inventory.node_sections import register_node_section

        register_node_section(
            name="reboot", template="deployments/partials/node_reboot.html", context=node_reboot_context
        )
