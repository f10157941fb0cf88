"""Which pytest-xdist worker this process is (0 without xdist), so shared services can be split between workers."""

import os


def worker_name() -> str:
    return os.environ.get("PYTEST_XDIST_WORKER", "")


def worker_index() -> int:
    name = worker_name()  # "gw0", "gw1", ...
    return int(name[2:]) if name.startswith("gw") else 0
