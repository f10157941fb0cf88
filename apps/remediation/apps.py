from django.apps import AppConfig


class RemediationConfig(AppConfig):
    name = "apps.remediation"
    label = "remediation"
    verbose_name = "Remediation"

    def ready(self) -> None:
        # The rack page's first section: its open leak and coolant events (apps/inventory/sections.py).
        from apps.inventory.sections import RACK_PAGE
        from apps.remediation import panels

        RACK_PAGE.register(
            name="coolant", template="remediation/partials/rack_coolant.html", context=panels.rack_coolant
        )
