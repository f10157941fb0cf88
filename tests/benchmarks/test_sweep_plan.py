"""The halving plan on its own (no database): every position of one bad node among N is named within 2⌈log₂N⌉+1
rounds with disjoint tests per round; two bad nodes; no known-good partner; pairwise rounds."""

import math
from itertools import combinations

import pytest

from apps.benchmarks.choices import Purpose
from apps.benchmarks.sweep import HalvingSweep, Outcome, pairwise_rounds, pairwise_suspects, round_bound


def play(hosts, bad, flaky=()):
    """Run the plan against a cluster where a test is bad when it holds a bad node (a flaky one only once)."""
    sweep, seen_flaky = HalvingSweep(hosts), set()
    while not sweep.done:
        tests = sweep.next_round()
        nodes = [host for test in tests for host in test.hosts]
        assert len(nodes) == len(set(nodes)), "tests of one round share a node"
        for test in tests:
            hit = bool(set(test.hosts) & set(bad))
            flake = set(test.hosts) & set(flaky) - seen_flaky
            seen_flaky |= flake
            sweep.record(test, Outcome(bad=hit or bool(flake)))
    return sweep


@pytest.mark.parametrize("size", [4, 5, 6, 7, 8, 17, 32, 64, 256])
def test_one_bad_node_anywhere_is_named_within_the_bound(size):
    hosts = [f"n{i:03d}" for i in range(size)]
    positions = range(size) if size <= 64 else range(0, size, 37)
    for position in positions:
        sweep = play(hosts, {hosts[position]})
        assert list(sweep.suspects) == [hosts[position]]
        assert sweep.rounds <= round_bound(size) == 2 * math.ceil(math.log2(size)) + 1


def test_a_set_larger_than_one_test_holds_starts_with_parts_within_it_and_names_the_bad_node():
    hosts = [f"n{i:04d}" for i in range(2048)]
    for position in (0, 1365, 2047):
        sweep = HalvingSweep(hosts, max_group=1024)
        first = sweep.next_round()
        assert [test.hosts for test in first] == [tuple(hosts[:1024]), tuple(hosts[1024:])]
        assert {test.purpose for test in first} == {Purpose.HALF}
        for test in first:
            sweep.record(test, Outcome(bad=hosts[position] in test.hosts))
        while not sweep.done:
            for test in sweep.next_round():
                assert len(test.hosts) <= 1024
                sweep.record(test, Outcome(bad=hosts[position] in test.hosts))
        assert list(sweep.suspects) == [hosts[position]] and sweep.rounds <= round_bound(2048)
    assert [len(test.hosts) for test in HalvingSweep(hosts[:1000], max_group=300).next_round()] == [250] * 4


def test_healthy_set_takes_one_round_and_names_nothing():
    sweep = play([f"n{i}" for i in range(32)], set())
    assert sweep.rounds == 1 and not sweep.suspects


def test_a_node_bad_once_is_cleared_by_its_re_test_and_not_named():
    hosts = [f"n{i:02d}" for i in range(16)]
    sweep = HalvingSweep(hosts)
    bad_until = {"n05": 3}  # bad in the whole, half, quarter... tests, good on the re-test against a partner
    while not sweep.done:
        for test in sweep.next_round():
            bad = "n05" in test.hosts and test.purpose != Purpose.CONFIRM and bad_until["n05"] > 0
            sweep.record(test, Outcome(bad=bad))
    assert sweep.suspects == {} and sweep.cleared == ["n05"]


def test_two_bad_nodes_are_both_named():
    hosts = [f"n{i:02d}" for i in range(32)]
    sweep = play(hosts, {"n03", "n29"})
    assert set(sweep.suspects) == {"n03", "n29"}


def test_without_a_known_good_partner_nothing_is_named_and_it_says_so():
    sweep = play(["a", "b"], {"a"})
    assert sweep.suspects == {} and sorted(sweep.unresolved) == ["a", "b"]


def test_three_nodes_probe_for_a_partner_and_still_name_the_bad_one():
    for bad in ("n0", "n1", "n2"):
        sweep = play(["n0", "n1", "n2"], {bad})
        assert list(sweep.suspects) == [bad] and sweep.rounds <= 6  # one over the bound: why the sweep wants 4


def test_pairwise_rounds_hold_every_pair_once_on_disjoint_nodes():
    hosts = [f"n{i}" for i in range(7)]
    rounds = pairwise_rounds(hosts)
    pairs = [pair for round_ in rounds for pair in round_]
    assert sorted(pairs) == sorted(combinations(hosts, 2))
    assert all(len({h for pair in round_ for h in pair}) == 2 * len(round_) for round_ in rounds)
    bad = {pair for pair in pairs if "n4" in pair}
    assert pairwise_suspects(bad, hosts) == ["n4"]
