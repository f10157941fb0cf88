"""The simulator's exporters wired to the workloads: the feature layer hands the simulator what runs where."""

from django.conf import settings

from apps.core.threads import thread_connection_returned
from apps.monitoring.telemetry import current_workloads
from apps.simulator import services as simulator
from apps.simulator.exporters import ExporterServer


def exporter_server(*, host: str, port: int, seed: int | None = None, refresh: float = 5.0) -> ExporterServer:
    seed = settings.RACKPILOT_SIM_SEED if seed is None else seed

    def build(workloads):
        with thread_connection_returned():  # called from the server's request threads
            return simulator.telemetry_model(workloads=workloads, seed=seed)

    def workloads():
        with thread_connection_returned():
            return current_workloads()

    def stamp():
        with thread_connection_returned():
            return simulator.telemetry_inputs_stamp()

    def store(rows):
        with thread_connection_returned():  # the ledger's flushing thread
            simulator.store_serving_load(rows)

    return ExporterServer(
        build=build, workloads=workloads, stamp=stamp, host=host, port=port, refresh=refresh, store=store
    )
