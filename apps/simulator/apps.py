from django.apps import AppConfig


class SimulatorConfig(AppConfig):
    name = "apps.simulator"
    label = "simulator"
    verbose_name = "Simulated cluster"

    def ready(self) -> None:
        # The sim transport answers from this app; installing it here means `sim` works wherever the app is installed.
        from apps.simulator import signals
        from apps.simulator.backend import register

        register()
        signals.connect()
