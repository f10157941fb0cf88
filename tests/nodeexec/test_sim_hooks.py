"""The simulator plugs into nodeexec's hooks (the sim transport and the simulated BMCs) from its AppConfig, so the
BMC reads and the jobs reach it without importing it; a backend missing a primitive is refused when registered."""

import pytest

from apps.nodeexec import sim
from apps.nodeexec.base import TransportError


def test_the_installed_simulator_answers_the_bmc_hook():
    bmcs = sim.simulated_bmc()
    assert bmcs.CHASSIS.startswith("/redfish/v1/Chassis/")
    assert bmcs.logged_in("admin", "rackpilot-sim") and not bmcs.logged_in("admin", "wrong")


def test_a_bmc_backend_without_its_primitives_is_refused_and_none_installed_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(sim, "_bmc_backend", sim.simulated_bmc())
    with pytest.raises(TypeError, match="node_figures"):
        sim.register_simulated_bmc(object())
    sim.register_simulated_bmc(None)
    with pytest.raises(TransportError, match="no simulator is installed"):
        sim.simulated_bmc()
