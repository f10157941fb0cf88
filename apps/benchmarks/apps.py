from django.apps import AppConfig


class BenchmarksConfig(AppConfig):
    name = "apps.benchmarks"
    label = "benchmarks"
    verbose_name = "Benchmarks"

    def ready(self) -> None:
        # Registers the `nccl-tests` job kind and the mpirun / nccl-tests catalogue commands it runs.
        from apps.benchmarks import kinds  # noqa: F401
