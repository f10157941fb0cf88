"""The sweep's heatmap: node × node up to 256 nodes; past that, rows of consecutive nodes, so that a 2,048-node
sweep's page stays the size of a 256-node one's and still narrows to the slow node's row."""

from types import SimpleNamespace

from apps.benchmarks.charts import sweep_heatmap

HOSTS = [f"gpu{number:03d}" for number in range(1, 9)]


def a_test(hosts, busbw):
    return SimpleNamespace(hosts=hosts, busbw_gb_per_s=busbw)


SWEEP = [  # one bad node, gpu006: the whole set, its halves, the bad half's halves, the pair with a good partner
    a_test(HOSTS, 180.0),
    a_test(HOSTS[:4], 360.0),
    a_test(HOSTS[4:], 181.0),
    a_test(HOSTS[4:6], 182.0),
    a_test(HOSTS[6:], 359.0),
    a_test(["gpu006", "gpu001"], 183.0),
]
SUSPECT = SimpleNamespace(
    node=SimpleNamespace(hostname="gpu006"), nic="ens3np0", cable="C1", switch="leaf", switch_port="swp6", cause="slow"
)


def cells(figure):
    heatmap = figure["data"][0]
    return heatmap["x"], heatmap["z"], heatmap["customdata"]


def test_each_cell_is_the_smallest_test_that_held_both_nodes():
    labels, values, widths = cells(sweep_heatmap(HOSTS, SWEEP, [SUSPECT]))

    assert labels == HOSTS
    assert values[5][0] == values[0][5] == 183.0 and widths[5][0] == 2  # the pair with its good partner
    assert values[4][5] == 182.0 and values[6][7] == 359.0 and values[0][3] == 360.0
    assert values[0][7] == 180.0 and widths[0][7] == 8  # only the first round held both
    assert [values[n][n] for n in range(8)] == [None] * 8  # a node with itself is no pair


def test_past_max_rows_a_row_is_a_group_of_consecutive_nodes():
    figure = sweep_heatmap(HOSTS, SWEEP, [SUSPECT], max_rows=4)
    labels, values, widths = cells(figure)

    assert labels == ["gpu001–gpu002", "gpu003–gpu004", "gpu005–gpu006", "gpu007–gpu008"]
    # The smallest test that held a node of each group: the pair gpu006 × gpu001 across groups 3 and 1; within
    # group 3 (two of its nodes) the bad half's half; groups 3 and 4 only ever met in the bad half.
    assert values[2][0] == values[0][2] == 183.0 and widths[2][0] == 2
    assert values[2][2] == 182.0 and values[3][3] == 359.0 and values[0][0] == 360.0
    assert values[2][3] == 181.0 and widths[2][3] == 4
    assert values[1][3] == 180.0
    marker = figure["data"][1]
    assert marker["x"] == marker["y"] == ["gpu005–gpu006"] and marker["text"] == ["gpu006 ens3np0"]


def test_a_2048_node_sweep_is_drawn_in_256_rows_of_8():
    hosts = [f"gpu{number:04d}" for number in range(1, 2049)]
    labels, values, _ = cells(sweep_heatmap(hosts, [a_test(hosts, 180.0), a_test(hosts[:1024], 360.0)], []))

    assert len(labels) == len(values) == 256 and labels[0] == "gpu0001–gpu0008" and labels[-1] == "gpu2041–gpu2048"
    assert values[0][127] == 360.0 and values[0][128] == 180.0
