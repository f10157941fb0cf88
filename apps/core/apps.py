from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "apps.core"
    label = "core"

    def ready(self) -> None:
        # Logins and failed logins go to the audit log.
        from apps.core import signins  # noqa: F401
