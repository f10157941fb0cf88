from django.apps import AppConfig


class BenchmarksConfig(AppConfig):
    name = "apps.benchmarks"
    label = "benchmarks"
    verbose_name = "Benchmarks"

    def ready(self) -> None:
        # Registers the `nccl-tests` job kind and the mpirun / nccl-tests catalogue commands it runs, and the switch
        # page's section of the benchmarks that crossed its ports.
        from apps.benchmarks import kinds  # noqa: F401
        from apps.benchmarks.crossings import switch_section
        from apps.inventory.sections import SWITCH_PAGE

        SWITCH_PAGE.register(
            name="benchmarks", template="benchmarks/partials/switch_crossings.html", context=switch_section
        )
