from django.apps import AppConfig


class HealthConfig(AppConfig):
    name = "apps.health"
    label = "health"
    verbose_name = "Health"

    def ready(self) -> None:
        # The dashboard's first panel, "What is wrong now" (apps/inventory/dashboard.py's registry).
        from apps.health import panels
        from apps.inventory.dashboard import register_panel

        register_panel(
            name="what-is-wrong-now", template="health/partials/wrong_now.html", context=panels.wrong_now, first=True
        )
