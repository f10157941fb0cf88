"""nvidia-smi -pl on a simulated node: the real tool's answers, a stored change that moves the model (power, clocks,
tokens/s), and a reboot that forgets it."""

import pytest

from apps.inventory.demo import ClusterShape, load_cluster
from apps.inventory.models import Node
from apps.parsers.nvidia_smi import parse_query_gpu
from apps.simulator import services
from apps.simulator.models import SimChange
from apps.simulator.telemetry import ServingRun, Workloads
from tests.conftest import Clock

pytestmark = pytest.mark.django_db
STARTED = Clock.START.timestamp() - 7200  # two hours before the test's clock starts
SERVING = ("gpu001", "gpu002")
WORKLOADS = Workloads(serving=(ServingRun("chat", "m", SERVING, 5000.0, STARTED),))
QUERY = ["nvidia-smi", "--query-gpu=index,power.limit", "--format=csv,noheader"]
LIMITS = ["nvidia-smi", "--query-gpu=index,power.limit,power.default_limit,power.min_limit", "--format=csv,noheader"]


@pytest.fixture
def cluster(clock, db):
    """The nodes' rows, stamped at the clock's start, as are the changes nvidia-smi stores."""
    load_cluster(ClusterShape(compute_nodes=3, nodes_per_rack=3, management_nodes=0))
    return Node.objects.get(hostname="gpu001")


def run(node, *argv):
    return services.run_command(node=node, argv=list(argv))


def test_pl_answers_as_the_real_tool_and_is_stored(cluster):
    result = run(cluster, "nvidia-smi", "-i", "0", "-pl", "400")
    assert result.exit_code == 0
    assert result.stdout == "Power limit for GPU 00000000:18:00.0 was set to 400.00 W from 700.00 W.\nAll done.\n"
    assert SimChange.objects.get(node=cluster, key="gpu:0:power_limit").value == 400
    again = run(cluster, "nvidia-smi", "-i", "0", "-pl", "450")
    assert "was set to 450.00 W from 400.00 W." in again.stdout
    report = parse_query_gpu(run(cluster, *QUERY).stdout, ["index", "power.limit"])
    limits = {gpu.index: gpu.power_limit_w for gpu in report.gpus}
    assert limits[0] == 450.0 and limits[1] == 700.0
    # The default limit stays the TDP; the minimum is the SKU's.
    assert run(cluster, *LIMITS).stdout.splitlines()[0] == "0, 450.00 W, 700.00 W, 200.00 W"


def test_a_limit_outside_the_boards_range_is_refused_and_changes_nothing(cluster):
    result = run(cluster, "nvidia-smi", "-i", "0", "-pl", "150")
    assert result.exit_code == 2
    assert result.stderr == (
        "Provided power limit 150.00 W is not a valid power limit which should be between 200.00 W and 700.00 W "
        "for GPU 00000000:18:00.0\nTerminating early due to previous errors.\n"
    )
    assert run(cluster, "nvidia-smi", "-pl", "701").exit_code == 2
    assert not SimChange.objects.filter(node=cluster).exists()


def test_every_gpu_without_i_and_a_reboot_forgets_the_limits(cluster):
    result = run(cluster, "nvidia-smi", "-pl", "300")
    assert result.stdout.count("was set to 300.00 W") == 8 and result.stdout.endswith("All done.\n")
    run(cluster, "sh", "-c", 'printf %s "$1" | base64 -d > "$2"', "x", "aGk=", "/etc/kept")
    assert services.reboot(node=cluster) == 8
    report = parse_query_gpu(run(cluster, *QUERY).stdout, ["index", "power.limit"])
    assert {gpu.power_limit_w for gpu in report.gpus} == {700.0}
    assert SimChange.objects.filter(node=cluster, key="file:/etc/kept").exists()  # what is on disk stays


def _peak(model, run_):
    """A moment at the day's peak of demand (a power cap costs tokens/s only when the load needs the clocks)."""
    after = Clock.START.timestamp() + 600  # after the changes, stamped at the clock's start
    return max((after + k * 600 for k in range(144)), key=lambda t: model.demand(run_, t))


def test_a_power_limit_lowers_the_modelled_power_clocks_and_tokens_per_second(cluster):
    before = services.telemetry_model(workloads=WORKLOADS)
    run_ = before.service("chat")
    peak = _peak(before, run_)
    for node in Node.objects.filter(hostname__in=SERVING):
        run(node, "nvidia-smi", "-pl", "250")
    after = services.telemetry_model(workloads=WORKLOADS)
    for hostname in SERVING:
        old, new = before.gpu_reading(hostname, 0, peak), after.gpu_reading(hostname, 0, peak)
        assert new["power_w"] < old["power_w"] and new["sm_mhz"] < old["sm_mhz"]
        assert new["power_limit_w"] == 250 and old["power_limit_w"] == 700
    assert after.service_rates(run_, peak)["tokens"] < 0.8 * before.service_rates(run_, peak)["tokens"]
    idle_before, idle_after = before.gpu_reading("gpu003", 0, peak), after.gpu_reading("gpu003", 0, peak)
    assert idle_before == idle_after  # a node without the change is untouched
    services.reboot(node=Node.objects.get(hostname="gpu001"))
    rebooted = services.telemetry_model(workloads=WORKLOADS)
    assert rebooted.gpu_reading("gpu001", 0, peak)["power_limit_w"] == 700
