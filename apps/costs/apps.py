from django.apps import AppConfig


class CostsConfig(AppConfig):
    name = "apps.costs"
    label = "costs"
    verbose_name = "Cost and energy policies"

    def ready(self) -> None:
        # Registers the policy kinds, their job kinds (power-limit, storage tiering) and their commands.
        from apps.costs import services  # noqa: F401
