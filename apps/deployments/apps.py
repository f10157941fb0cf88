from django.apps import AppConfig


class DeploymentsConfig(AppConfig):
    name = "apps.deployments"
    label = "deployments"
    verbose_name = "Deployments"

    def ready(self) -> None:
        # Registers the `deploy`, `scheduler-action` and `reboot` job kinds with the commands they run, and the node
        # page's scheduler and reboot sections.
        from apps.deployments import kinds, node_page  # noqa: F401
        from apps.inventory.sections import NODE_PAGE

        NODE_PAGE.register(
            name="scheduler", template="deployments/partials/node_scheduler.html", context=node_page.scheduler_section
        )
        NODE_PAGE.register(
            name="reboot", template="deployments/partials/node_reboot.html", context=node_page.reboot_section
        )
