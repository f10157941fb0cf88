"""What a read request keeps for itself (apps.core.reads): the dashboard's panels share one telemetry source, so the
simulator's model reads the inventory's fingerprint once a page; writes and code outside a request keep nothing."""

import pytest

from apps.core.reads import ReadScope, kept_for_this_read


def counting(calls: list):
    def compute():
        calls.append(1)
        return len(calls)

    return compute


def test_a_read_works_its_answer_out_once_and_the_next_read_afresh():
    calls = []
    with ReadScope("GET"):
        assert kept_for_this_read("answer", counting(calls)) == kept_for_this_read("answer", counting(calls)) == 1
    with ReadScope("HEAD"):
        assert kept_for_this_read("answer", counting(calls)) == 2
    assert len(calls) == 2


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE"])
def test_a_write_and_code_outside_a_request_keep_nothing(method):
    calls = []
    with ReadScope(method):
        kept_for_this_read("answer", counting(calls))
        kept_for_this_read("answer", counting(calls))
    kept_for_this_read("answer", counting(calls))
    assert len(calls) == 3
