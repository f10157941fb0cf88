"""The files on a simulated node's tiers and the tools tiering uses: find and lsof in the real tools' formats
(compared with output captured on a real machine), mv -n -T that refuses to overwrite, and moves that persist."""

import re
from pathlib import Path

import pytest

from apps.inventory.demo import ClusterShape, load_cluster
from apps.inventory.models import Node
from apps.parsers.files import parse_find_printf, parse_lsof_fields
from apps.simulator import services
from apps.simulator.models import SimChange

pytestmark = pytest.mark.django_db
DATA = Path(__file__).resolve().parents[1] / "parsers" / "data"
FIND = ["find", "/scratch", "-xdev", "-type", "f", "-atime", "+6", "-size", "+0c", "!", "-name", "*\n*"]
PRINTF = ["-printf", "%s %A@ %p\\n"]


@pytest.fixture
def node(clock, db):
    """A node on the clock the test sets: find's ages (and a file's hour) do not depend on the hour it runs at."""
    load_cluster(ClusterShape(compute_nodes=1, nodes_per_rack=1, management_nodes=0))
    return Node.objects.get(hostname="gpu001")


def run(node, *argv, seed=0):
    return services.run_command(node=node, argv=list(argv), seed=seed)


def test_find_lists_what_was_not_read_for_the_age_in_the_real_format(node, clock):
    result = run(node, *FIND, *PRINTF)
    assert result.exit_code == 0
    real_line = (DATA / "find-printf-atime-real.txt").read_text().splitlines()[0]
    shape = re.compile(r"\d+ \d+\.\d{10} /.+")
    assert shape.fullmatch(real_line)
    assert all(shape.fullmatch(line) for line in result.stdout.splitlines())
    now = clock.now.timestamp()
    files = parse_find_printf(result.stdout).files
    assert files and all(now - found.atime >= 7 * 86400 for found in files)
    everything = parse_find_printf(run(node, "find", "/scratch", "-type", "f", *PRINTF).stdout).files
    assert any(now - found.atime < 86400 for found in everything)  # the data set read every epoch
    assert run(node, *FIND, *PRINTF).stdout == result.stdout  # deterministic
    assert run(node, *FIND, *PRINTF, seed=7).stdout != result.stdout  # per seed


def test_lsof_answers_nothing_with_exit_1_when_nothing_is_open_as_lsof_does(node):
    result = run(node, "lsof", "-w", "-F", "pcfn", "+D", "/scratch")
    assert (result.exit_code, result.stdout) == (1, "")
    assert run(node, "lsof", "-w", "-F", "pcfn", "+D", "/nowhere").exit_code == 1
    real = parse_lsof_fields((DATA / "lsof-F-pcfn-real.txt").read_text())
    assert real.files  # the letters the simulator writes (p, c, f, n) are the real ones


def test_mv_moves_a_file_refuses_to_overwrite_and_the_move_persists(node):
    files = parse_find_printf(run(node, "find", "/scratch/ckpt", "-type", "f", *PRINTF).stdout).files
    first, second = files[0], files[1]
    target = "/shared" + first.path[len("/scratch") :]

    assert run(node, "mv", "-n", "-T", "--", first.path, target).exit_code == 0
    moved = parse_find_printf(run(node, "find", target, "-maxdepth", "0", "-type", "f", *PRINTF).stdout).files
    assert [(found.size_bytes, found.atime) for found in moved] == [(first.size_bytes, first.atime)]
    assert run(node, "find", first.path, "-maxdepth", "0", *PRINTF).exit_code == 1
    assert SimChange.objects.filter(node=node, key__startswith="tiered:").count() == 1

    refused = run(node, "mv", "-n", "-T", "--", second.path, target)
    assert refused.exit_code == 1 and "not replacing" in refused.stderr
    gone = run(node, "mv", "-n", "-T", "--", first.path, target + ".x")
    assert gone.exit_code == 1 and "cannot stat" in gone.stderr

    assert run(node, "mv", "-n", "-T", "--", target, first.path).exit_code == 0  # back: one record, first path
    back = parse_find_printf(run(node, "find", "/scratch/ckpt", "-type", "f", *PRINTF).stdout).files
    assert back == files
