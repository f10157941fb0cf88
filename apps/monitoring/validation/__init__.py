"""Business validation: a serving load test against an inference service, judged against the brief's four business
criteria. loadtest.py: the load test (no Django); criteria.py: the verdicts from its figures; measure.py: one run from
start to verdict (the load, then the GPUs' energy and utilisation); runs.py: starting a run, and what pages, the API
and acceptance reports read of them; recording.py: what the `business-validation` kind
(apps/monitoring/kinds/business_validation.py) reads before its fan-out and writes after it."""
