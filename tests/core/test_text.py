"""Counts read as words: "1 node", "3 nodes", never "node(s)"."""

import pytest

from apps.core.text import counted, noun


@pytest.mark.parametrize(
    ("n", "word", "plural", "expected"),
    [
        (1, "node", None, "1 node"),
        (0, "node", None, "0 nodes"),
        (2, "node", None, "2 nodes"),
        (1, "trainer process", "trainer processes", "1 trainer process"),
        (3, "trainer process", "trainer processes", "3 trainer processes"),
        (2, "fact family", "fact families", "2 fact families"),
        (2, "GPU", None, "2 GPUs"),
    ],
)
def test_a_count_reads_with_the_noun_that_goes_with_it(n, word, plural, expected):
    assert counted(n, word, plural) == expected


def test_the_noun_alone_follows_the_count():
    assert (noun(1, "rank"), noun(2, "rank"), noun(0, "switch", "switches")) == ("rank", "ranks", "switches")
