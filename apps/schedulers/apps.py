from django.apps import AppConfig


class SchedulersConfig(AppConfig):
    name = "apps.schedulers"
    label = "schedulers"
    verbose_name = "Schedulers"

    def ready(self) -> None:
        # Registers the `scheduler-readback` job kind and the Slurm commands it and the scheduler actions run.
        from apps.schedulers import kinds  # noqa: F401
