"""What the operator's first pages ask, worked out once when the server starts, so that the first view of the
dashboard, the cluster telemetry and the SLOs does not pay for it (at 512 simulated nodes: their histories, the
fleet's telemetry parts and the topology rules, ~8 s; Django's URLs and templates). Reads only: each piece is a
page's own read, run here before anyone asks."""

import logging
import threading
import time

from django.db import close_old_connections, connections
from django.template.loader import get_template
from django.urls import get_resolver

from apps.core.reads import ReadScope
from apps.inventory.dashboard import panels
from apps.monitoring import services
from apps.monitoring.models import Slo
from apps.monitoring.telemetry import Window

logger = logging.getLogger(__name__)
KEEP_WARM_S = 60.0  # the 1 h window's step


def warm_up() -> float:
    """Work out the dashboard's panels, the cluster telemetry over the default window and each SLO's status;
    returns the seconds it took. A piece that fails is logged and skipped: the page will say why when asked."""
    started = time.perf_counter()
    pieces = [("the URLs and templates", _load_urls_and_templates)]
    pieces += [(f"dashboard panel {panel.name}", panel.context) for panel in panels()]
    pieces.append(("cluster telemetry", lambda: services.cluster_page(window=Window.named("1h"))))
    for row in Slo.objects.select_related("service", "training_job", "rack"):
        pieces.append((f"SLO {row.name}", lambda row=row: services.slo_status(row)))
    with ReadScope("GET"):  # one read: its pieces share what they ask for, as a page's panels do
        for name, compute in pieces:
            try:
                compute()
            except Exception:  # a warm-up never stops the server
                logger.exception("Warming up %s failed", name)
    return time.perf_counter() - started


def _load_urls_and_templates() -> None:
    """What Django does at the first request: import every view through the URLconf, map the URL names, compile the
    dashboard's templates (a quarter of a second on the first view)."""
    resolver = get_resolver()
    resolver.url_patterns, resolver.reverse_dict  # noqa: B018 (each is loaded when first read)
    for name in ("base.html", "inventory/dashboard.html", *(panel.template for panel in panels())):
        get_template(name)


def start_warm_up(*, then=None, every: float | None = KEEP_WARM_S, stop: threading.Event | None = None):
    """warm_up() on a thread of its own (the server answers meanwhile), then `then()` (the server's GC tuning: what
    was worked out lives as long as the process), then again just after each turn of `every` seconds (the minute, when
    the 1 h window moves) until `stop` is set: each round carries the windows forward by the steps they moved (a
    fraction of a second at 512 nodes), so neither the first view of a new minute nor the first after an hour nobody
    looked works them out. Returns the thread."""
    stop = stop or threading.Event()

    def run() -> None:
        rounds = 0
        while not stop.is_set():
            close_old_connections()
            try:
                seconds = warm_up()
            finally:
                connections.close_all()
            if rounds == 0:
                logger.info("Warmed up the first pages in %.1f s", seconds)
                if then is not None:
                    then()
            rounds += 1
            # Just after the next turn of `every` (a minute): the windows move then, and this round carries them.
            if every is None or stop.wait(every - time.time() % every + every / 60):
                return

    thread = threading.Thread(target=run, name="rackpilot-warm-up", daemon=True)
    thread.start()
    return thread
