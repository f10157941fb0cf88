from django.apps import AppConfig


class DiagnosisConfig(AppConfig):
    name = "apps.diagnosis"
    label = "diagnosis"
    verbose_name = "Fault diagnosis"

    def ready(self):
        from apps.diagnosis import (
            kinds,  # noqa: F401  (registers the nccl-timeout runbook)
            simulation,
        )

        simulation.install()
