"""The tokens a business validation credits to its run: the service's counter is read before and after, outside the
run, and its increase over the reads' span is not the run's (a loaded machine stretches the reads)."""

from apps.monitoring.validation.loadtest import LoadResult, Outcome
from apps.monitoring.validation.measure import run_tokens


def result(*, before, after, span, duration=4.0, tokens=(24,) * 10, failed=0) -> LoadResult:
    outcomes = [Outcome(started=0.0, ok=True, tokens=count) for count in tokens]
    outcomes += [Outcome(started=0.0, ok=False, tokens=3) for _ in range(failed)]
    return LoadResult("http://sim/v1", 100.0, 100.0 + duration, outcomes, before, after, counter_span=span)


def test_the_other_traffic_counts_at_its_rate_over_the_run_only():
    # 240 tokens the test's, 600 more the other traffic's over the 6 s between the reads: 100/s, 400 in the 4 s run.
    assert run_tokens(result(before=1_000.0, after=1_840.0, span=6.0)) == 240 + 400


def test_reads_that_took_longer_credit_the_run_no_more():
    # The same service read by a slow client: the reads 12 s apart, the other traffic still 100/s.
    assert run_tokens(result(before=1_000.0, after=2_440.0, span=12.0)) == 240 + 400


def test_tokens_of_failed_requests_are_the_tests_own():
    assert run_tokens(result(before=0.0, after=246.0, span=4.0, failed=2)) == 246


def test_a_counter_that_could_not_be_read_counts_what_the_test_received():
    assert run_tokens(result(before=None, after=None, span=None, failed=2)) == 240


def test_a_counter_below_the_tests_own_tokens_adds_no_other_traffic():
    assert run_tokens(result(before=0.0, after=200.0, span=5.0)) == 240
