"""Time the topology evaluation and the map at 32 and 512 compute nodes.

    .venv/bin/python bench/topology.py                 # 32 and 512
    .venv/bin/python bench/topology.py --sizes 32 128 512 --repeat 7

Each size runs in its own process on a throwaway SQLite database under var/bench/topology-<size>/ (recreated every
run), loaded with the demo cluster's shape at that size. Prints medians of --repeat runs after one warm-up, and the
ratio of a Gomory-Hu tree over the whole plane graph (nodes as vertices, one max-flow per vertex) to the switch-level
tree the rule uses, with a check that both give the same value for every pair. `evaluate ms` keeps the planes'
trees (the rules after a node's change), `(cold)` is the first with nothing kept; `min-cut ms` works the trees out
each time, `(kept)` reuses them.
"""

import argparse
import json
import statistics
import time

from child import run_on_fresh_sqlite, setup_django


def _median_ms(function, repeat: int) -> tuple[float, object]:
    result = function()  # warm-up
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        result = function()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times), result


def measure(size: int, repeat: int, reference: bool) -> dict:
    """Runs inside the child process: Django set up on this size's own database."""
    setup_django()
    from django.core.management import call_command

    from apps.inventory.demo import ClusterShape, load_cluster
    from apps.topology import rules
    from apps.topology.charts import figure_json, topology_figure
    from apps.topology.graph import build_cluster_graph
    from apps.topology.services import evaluate_topology, record_topology, rule_summary, run_rules

    call_command("migrate", verbosity=0)
    started = time.perf_counter()
    load_cluster(ClusterShape(compute_nodes=size))
    figures: dict = {"size": size, "load_s": time.perf_counter() - started}

    started = time.perf_counter()
    evaluate_topology()
    figures["evaluate_cold_ms"] = (time.perf_counter() - started) * 1000
    figures["evaluate_ms"], report = _median_ms(evaluate_topology, repeat)
    figures["graph_ms"], cluster = _median_ms(build_cluster_graph, repeat)
    figures["rules_ms"], results = _median_ms(lambda: run_rules(cluster), repeat)
    figures["bandwidth_ms"], bandwidth = _median_ms(lambda: _with_trees_worked_out(rules, cluster), repeat)
    figures["bandwidth_kept_ms"], _ = _median_ms(lambda: rules.pair_bandwidth(cluster), repeat)
    figures["max_flows"] = bandwidth.max_flows
    figures["groups"] = len(bandwidth.groups)
    figures["chart_ms"], data = _median_ms(lambda: figure_json(topology_figure(cluster, results)), repeat)
    figures["chart_kb"] = len(json.dumps(data)) / 1024
    started = time.perf_counter()
    record_topology()
    figures["record_ms"] = (time.perf_counter() - started) * 1000
    figures["summary_recorded_ms"], _ = _median_ms(rule_summary, repeat)
    figures["passed"] = report.passed

    if reference:
        agree, elapsed = True, 0.0
        for plane in cluster.data_planes():
            started = time.perf_counter()
            values = rules.all_pairs_reference(cluster, plane)
            elapsed += time.perf_counter() - started
            agree = agree and all(bandwidth.between(plane, a, b) == value for (a, b), value in values.items())
        figures["whole_graph_gh_ms"] = elapsed * 1000
        figures["whole_graph_max_flows"] = sum(
            len(rules.plane_switch_graph(cluster, plane)) + len(rules.attachments(cluster, plane)) - 1
            for plane in cluster.data_planes()
        )
        figures["reference_agrees"] = agree
    return figures


def _with_trees_worked_out(rules, cluster):
    rules.forget_plane_cuts()
    return rules.pair_bandwidth(cluster)


def run_child(size: int, repeat: int, reference: bool) -> dict:
    args = [str(size), "--repeat", str(repeat)] + ([] if reference else ["--no-reference"])
    return run_on_fresh_sqlite(__file__, f"topology-{size}", args)


def report(rows: list[dict]) -> None:
    print(
        f"{'compute nodes':>14} {'load s':>7} {'evaluate ms':>12} {'(cold)':>8} {'graph ms':>9} {'rules ms':>9} "
        f"{'min-cut ms':>11} {'(kept)':>7} {'max-flows':>10} {'chart ms':>9} {'chart kB':>9} {'summary ms':>11}"
    )
    for row in rows:
        print(
            f"{row['size']:>14} {row['load_s']:>7.1f} {row['evaluate_ms']:>12.1f} {row['evaluate_cold_ms']:>8.1f} "
            f"{row['graph_ms']:>9.1f} {row['rules_ms']:>9.1f} {row['bandwidth_ms']:>11.1f} "
            f"{row['bandwidth_kept_ms']:>7.1f} {row['max_flows']:>10} "
            f"{row['chart_ms']:>9.1f} {row['chart_kb']:>9.0f} {row['summary_recorded_ms']:>11.2f}"
        )
    print()
    print("All-pairs min-cut: the rule's switch-level Gomory-Hu tree vs one over the whole plane (nodes as vertices)")
    for row in rows:
        if "whole_graph_gh_ms" not in row:
            continue
        ratio = row["whole_graph_gh_ms"] / row["bandwidth_ms"] if row["bandwidth_ms"] else float("nan")
        print(
            f"  {row['size']:>4} nodes: rule {row['bandwidth_ms']:.1f} ms ({row['max_flows']} max-flows, "
            f"{row['groups']} groups of identical nodes) vs whole graph {row['whole_graph_gh_ms']:.1f} ms "
            f"({row['whole_graph_max_flows']} max-flows): {ratio:.0f}x; same values for every pair: "
            f"{'yes' if row['reference_agrees'] else 'NO'}"
        )
    print("\nAll rules pass on every size:", all(row["passed"] for row in rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[32, 512])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-reference", action="store_true", help="skip the whole-graph Gomory-Hu comparison")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child, args.repeat, not args.no_reference)))
        return
    report([run_child(size, args.repeat, not args.no_reference) for size in args.sizes])


if __name__ == "__main__":
    main()
