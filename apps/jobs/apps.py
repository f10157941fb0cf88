from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "apps.jobs"
    label = "jobs"

    def ready(self) -> None:
        # The kinds shipped with the engine (shell-check, sleep) register themselves; feature apps register theirs
        # in their own ready().
        from apps.inventory.transfer.background import register_background_import
        from apps.jobs import kinds  # noqa: F401
        from apps.jobs.events import install_log_bridge
        from apps.jobs.imports import start_inventory_import

        install_log_bridge()
        register_background_import(start_inventory_import)  # large inventory imports run as jobs
