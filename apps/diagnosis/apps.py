from django.apps import AppConfig


class DiagnosisConfig(AppConfig):
    name = "apps.diagnosis"
    label = "diagnosis"
    verbose_name = "Fault diagnosis"

    def ready(self):
        from apps.diagnosis import (
            kinds,  # noqa: F401  (registers the runbooks: nccl-timeout, gpu-utilisation, training-interrupted)
            live,
            quarantine,
            rehearsal,
            repairs,
            signals,
            simulation,
        )
        from apps.diagnosis.services import node_history
        from apps.inventory.sections import NODE_PAGE

        simulation.install()
        quarantine.install()
        signals.connect()
        repairs.connect()
        rehearsal.connect()
        live.connect()
        NODE_PAGE.register(name="incidents", template="diagnosis/partials/node_incidents.html", context=node_history)
