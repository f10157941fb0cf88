"""The default transport has one home: every job, benchmark, form and schedule asks default_transport."""

import pytest

from apps.nodeexec.transports import TRANSPORT_NAMES, default_transport


@pytest.mark.parametrize(
    ("install", "offered", "chosen"),
    [
        ("sim", TRANSPORT_NAMES, "sim"),
        ("ssh", TRANSPORT_NAMES, "ssh"),
        ("local", ("ssh", "sim"), "ssh"),  # a benchmark does not run over local: its first transport
        ("ssh", ("local", "sim"), "local"),  # BMCs are never read over ssh
        ("sim", ("ssh", "local"), "ssh"),  # traces are read off real nodes only
    ],
)
def test_the_install_default_when_offered_else_the_first_offered(settings, install, offered, chosen):
    settings.RACKPILOT_JOB_DEFAULT_TRANSPORT = install
    assert default_transport(offered=offered) == chosen
