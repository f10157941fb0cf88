from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "apps.jobs"
    label = "jobs"

    def ready(self) -> None:
        # The kinds shipped with the engine register themselves; feature apps register theirs in their own ready().
        from apps.jobs import builtin_kinds  # noqa: F401
        from apps.jobs.events import install_log_bridge

        install_log_bridge()
