"""The simulated cluster's clock, as epoch seconds: Django's (`timezone.now`), the clock that stamps the simulator's
records (a fault's injection, a command's change) and a training job's start.

What the simulated training runs show is a function of those records and of this moment: the log's step lines and
checkpoint saves, the GPUs' utilisation samples, the schedulers' elapsed times. Reading them at the same clock keeps
them consistent: the demo runs on real time, and a test that sets the clock (tests/conftest.py, `clock`) moves the
records' ages and the runs' progress together, however loaded the machine is.
"""

from django.utils import timezone


def now() -> float:
    return timezone.now().timestamp()
