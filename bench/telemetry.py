"""Time the simulated telemetry: building the model, rendering exporter pages, and the telemetry pages' reads.

    .venv/bin/python bench/telemetry.py                 # 32 compute nodes (the demo) and 128
    .venv/bin/python bench/telemetry.py --sizes 32 --repeat 5

Each size runs in its own process on a throwaway SQLite database (var/bench/telemetry-<size>/) with the demo's shape
at that size and the demo workloads (a service on gpu001-004, a training job on gpu005-020). Prints medians of
--repeat runs after one warm-up: the model's build (inventory and faults read), one node's dcgm-exporter page, the
service's vLLM page (warm: counters since the daily restart cached), a whole scrape round (every node and the
service), and the cluster page's reads from the simulator for each window.
"""

import json
import statistics
import time

from child import run_on_fresh_sqlite, setup_django


def _median_ms(function, repeat: int) -> float:
    function()
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        function()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def measure(size: int, repeat: int) -> dict:
    setup_django()
    from django.core.management import call_command

    from apps.inventory.demo import ClusterShape, load_cluster
    from apps.monitoring import services
    from apps.monitoring.telemetry import Window, current_workloads
    from apps.simulator import services as simulator
    from apps.simulator.exporters import dcgm_exposition, vllm_exposition
    from apps.workloads.demo import load_workloads

    call_command("migrate", verbosity=0)
    load_cluster(ClusterShape(compute_nodes=size))
    load_workloads()
    workloads = current_workloads()
    figures = {"size": size}
    figures["build_ms"] = _median_ms(lambda: simulator.telemetry_model(workloads=workloads), repeat)
    model = simulator.telemetry_model(workloads=workloads)
    now = time.time()
    hosts = sorted(model.histories)
    figures["dcgm_page_ms"] = _median_ms(lambda: dcgm_exposition(model, "gpu001", now), repeat)
    figures["dcgm_page_kb"] = len(dcgm_exposition(model, "gpu001", now)) / 1024
    cold = time.perf_counter()
    vllm_exposition(model, "chat-llama-70b", now)
    figures["vllm_cold_ms"] = (time.perf_counter() - cold) * 1000
    figures["vllm_page_ms"] = _median_ms(lambda: vllm_exposition(model, "chat-llama-70b", time.time()), repeat)
    figures["scrape_round_ms"] = _median_ms(
        lambda: [dcgm_exposition(model, host, now) for host in hosts] + [vllm_exposition(model, "chat-llama-70b", now)],
        repeat,
    )
    for name in ("1h", "24h", "7d"):
        figures[f"cluster_{name}_ms"] = _median_ms(
            lambda name=name: services.cluster_page(window=Window.named(name)), 1
        )
    return figures


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[32, 128])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child, args.repeat)))
        return
    rows = [
        run_on_fresh_sqlite(__file__, f"telemetry-{size}", [str(size), "--repeat", str(args.repeat)])
        for size in args.sizes
    ]
    print(
        f"{'compute nodes':>14} {'model ms':>9} {'dcgm page ms':>13} {'kB':>5} {'vLLM cold ms':>13} {'vLLM ms':>8} "
        f"{'scrape round ms':>16} {'cluster 1h ms':>14} {'24h ms':>8} {'7d ms':>8}"
    )
    for row in rows:
        print(
            f"{row['size']:>14} {row['build_ms']:>9.0f} {row['dcgm_page_ms']:>13.1f} {row['dcgm_page_kb']:>5.0f} "
            f"{row['vllm_cold_ms']:>13.0f} {row['vllm_page_ms']:>8.1f} {row['scrape_round_ms']:>16.0f} "
            f"{row['cluster_1h_ms']:>14.0f} {row['cluster_24h_ms']:>8.0f} {row['cluster_7d_ms']:>8.0f}"
        )


if __name__ == "__main__":
    main()
