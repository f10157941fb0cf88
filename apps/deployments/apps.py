from django.apps import AppConfig


class DeploymentsConfig(AppConfig):
    name = "apps.deployments"
    label = "deployments"
    verbose_name = "Deployments"

    def ready(self) -> None:
        # Registers the `deploy` and `scheduler-action` job kinds with the commands they run, and the node page's
        # scheduler section.
        from apps.deployments import kinds, node_operations  # noqa: F401
        from apps.inventory.sections import NODE_PAGE

        NODE_PAGE.register(
            name="scheduler",
            template="deployments/partials/node_scheduler.html",
            context=node_operations.node_scheduler_section,
        )
