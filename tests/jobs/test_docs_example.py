"""docs/jobs.md's "A new command, end to end": its `nic-mtu` kind, taken from the page as written, registers a new
catalogue command with a placeholder inside a path, runs over the simulator, and records what the page says; and
the page's account of how the simulator answers a command is the code's."""

import re
from pathlib import Path

import pytest
from rest_framework.exceptions import ValidationError

from apps.inventory.models import Node
from apps.jobs import services
from apps.jobs.choices import JobStatus, StepStatus
from apps.jobs.kinds import KINDS
from apps.jobs.models import Job, JobEvent, JobStep
from apps.nodeexec.catalogue import CATALOGUE
from apps.simulator import services as simulator
from apps.simulator import shell
from apps.simulator.tools import system

pytestmark = pytest.mark.django_db(transaction=True)
DOC = Path(__file__).resolve().parents[2] / "docs" / "jobs.md"
SECTION = "### A new command, end to end"


@pytest.fixture
def nic_mtu_kind():
    section = DOC.read_text().split(SECTION, 1)[1]
    source = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    exec(compile(source, f"{DOC}:nic-mtu", "exec"), {"__name__": "docs_nic_mtu"})  # noqa: S102  (our own page)
    yield KINDS["nic-mtu"]
    KINDS.pop("nic-mtu")
    CATALOGUE.pop("nic-mtu")


def _create(interface: str, mtu: int = 9000):
    return services.create_job(
        kind="nic-mtu",
        targets=services.TargetSpec(nodes=("gpu017", "gpu018")),
        parameters={"interface": interface, "mtu": mtu},
        transport="sim",
    )


@pytest.mark.parametrize("interface", ["../../etc", "eth0; reboot", "ens1np0/..", "a b", ""])
def test_the_example_refuses_a_bad_interface_before_storing_anything(nic_mtu_kind, demo_cluster, interface):
    with pytest.raises(ValidationError) as refused:
        _create(interface)
    assert "interface" in refused.value.detail["parameters"]
    assert not Job.objects.exists()


def test_the_example_kind_runs_over_the_simulator_as_the_page_says(nic_mtu_kind, demo_cluster, run_shards, settings):
    settings.RACKPILOT_EVENT_FLUSH_MS = 50
    simulator.inject_fault(
        node=Node.objects.get(hostname="gpu018"), kind="mtu", target="ens1np0", parameters={"mtu": 1500}
    )

    job = run_shards(_create("ens1np0"))

    assert job.status == JobStatus.FAILED  # the kind's statuses decide the job's: every cat exited 0
    cells = dict(JobStep.objects.filter(job=job).values_list("node__hostname", "status"))
    assert cells == {"gpu017": StepStatus.SUCCEEDED, "gpu018": StepStatus.FAILED}
    summaries = dict(JobStep.objects.filter(job=job).values_list("node__hostname", "summary"))
    assert summaries == {"gpu017": "MTU 9000 (expected 9000)", "gpu018": "MTU 1500 (expected 9000)"}
    finished = JobEvent.objects.get(job=job, hostname="gpu018", step="mtu", message__startswith="mtu: ")
    assert (finished.data["mtu"], finished.data["expected"]) == (1500, 9000)  # cell_record's data, pushed with it
    # The placeholder inside the path was filled: the nodes read the interface's file, not a path with braces.
    (step,) = nic_mtu_kind().steps(job.parameters)
    assert step.argv() == ["cat", "/sys/class/net/ens1np0/mtu"]
    assert JobEvent.objects.filter(job=job, hostname="gpu017", step="mtu", level="output", message="9000").exists()


def test_the_simulator_answers_as_the_page_says(demo_cluster):
    node = Node.objects.get(hostname="gpu017")
    assert shell.TOOLS["cat"] is system.cat  # `cat` is system.cat, files answered by system.read_file
    assert shell.TOOLS["ethtool"].__module__ == "apps.simulator.tools.network"
    unknown = simulator.run_command(node=node, argv=["sudo", "-n", "--", "/usr/sbin/no-such-tool", "-x"])
    assert (unknown.exit_code, unknown.stderr) == (127, "bash: /usr/sbin/no-such-tool: command not found\n")
    assert simulator.run_command(node=node, argv=["cat", "/sys/class/net/ens1np0/mtu"]).stdout == "9000\n"
