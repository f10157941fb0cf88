"""Two job kinds. `node-benchmark` (at the end): HPL-MxP, nvbandwidth or the burn-in soak on each target, its
figures written as Measurement rows. `nccl-tests`: nccl-tests on each target alone (its GPUs over NVLink), or
launched with mpirun from each target across the hosts of its test (a round of a sweep: the tests of one job run at
the same time on disjoint nodes; each test's launcher is its cell).

A test with `rails` also runs one test per RDMA device of its launcher (NCCL_IB_HCA==mlx5_N: one rail alone) and
reads the launcher's links (ip -j link, ethtool, mlnx_qos), so a slow node is named down to its NIC.
Results (every row, the judged figure, verdict, evidence) are written in shard_finished; pages and the API only read.
"""

import asyncio
import binascii
import io

from rest_framework import serializers

from apps.benchmarks import judging, recording, suites, timelines
from apps.benchmarks.choices import (
    BURN_IN_DEFAULT_SECONDS,
    BURN_IN_MAX_SECONDS,
    BURN_IN_MIN_SECONDS,
    DCGM_LEVELS,
    DCGM_NOMINAL_SECONDS,
    HPL_MAX_N,
    HPL_MIN_N,
    HPL_NB,
    ITERATIONS,
    MAX_BYTES,
    MAX_ITERATIONS,
    MIN_BYTES,
    NODE_SUITES,
    TIMELINE_MAX_FILE_BYTES,
    TIMELINE_MAX_FILES,
    BurnLoad,
    Collective,
    Purpose,
    Suite,
)
from apps.core.text import counted
from apps.jobs.choices import EventLevel, StepStatus
from apps.jobs.events import emit
from apps.jobs.kinds import CellRecord, JobKind, StepSpec, default_status, default_summary, register_kind
from apps.nodeexec.base import CommandResult, NodeTarget
from apps.nodeexec.catalogue import (
    CATALOGUE,
    DCGM_SOAK_SCRIPT,
    HOSTNAME,
    HPL_SCRIPT,
    INTERFACE,
    MPIRUN_HOSTFILE_SCRIPT,
    PLACEHOLDERS,
    SOAK_SCRIPT,
    TRACE_HEADER,
    TRACE_READ_SCRIPT,
    Command,
    Placeholder,
    register_command,
    register_placeholder,
)
from apps.nodeexec.fanout import wait_unless_canceled
from apps.parsers.errors import ParseError
from apps.parsers.nccl_tests import parse_nccl_tests
from apps.parsers.network import parse_ethtool_stats

NCCL_TIMEOUT = 1800.0
HCA_ENTRY = r"[A-Za-z0-9_]{1,32}(?::[0-9]{1,2})?"  # an RDMA device, optionally :port
MAX_MPI_HOSTS = 1024  # in one mpirun -H value

# The benchmarks' placeholders (HPL-MxP's GPU affinity list, HPL's problem, nvbandwidth, the soaks, nccl-tests and
# mpirun, the timeline read), registered before the commands that use them.
for _name, _placeholder in {
    "gpu_affinity": Placeholder(r"[0-9]{1,2}(:[0-9]{1,2}){0,15}", "GPU indexes separated by colons"),
    "hpl_n": Placeholder(r"[0-9]{1,8}", "a matrix order"),
    "hpl_nb": Placeholder(r"[0-9]{1,5}", "a block size"),
    "hpl_p": Placeholder(r"[0-9]{1,5}", "process rows"),
    "hpl_q": Placeholder(r"[0-9]{1,5}", "process columns"),
    "nvbandwidth_cases": Placeholder(r"[a-z_]{1,64}(,[a-z_]{1,64}){0,63}", "nvbandwidth test cases by commas"),
    "dcgm_level": Placeholder(r"[34]", "a long dcgmi diag level (3 or 4)"),
    "nccl_binary": Placeholder(r"[a-z][a-z_]{0,31}_perf", "an nccl-tests binary (all_reduce_perf, ...)"),
    "nccl_bytes": Placeholder(r"[0-9]{1,11}", "a size in bytes"),
    "nccl_max_bytes": Placeholder(r"[0-9]{1,11}", "a size in bytes"),
    "nccl_step_factor": Placeholder(r"[0-9]{1,2}", "a step factor"),
    "nccl_iters": Placeholder(r"[0-9]{1,4}", "an iteration count"),
    "mpi_np": Placeholder(r"[0-9]{1,5}", "a number of processes"),
    "mpi_hosts": Placeholder(
        rf"{HOSTNAME}:[0-9]{{1,2}}(?:,{HOSTNAME}:[0-9]{{1,2}}){{0,{MAX_MPI_HOSTS - 1}}}", "host:slots entries by commas"
    ),
    "nccl_socket_ifname": Placeholder(
        rf"NCCL_SOCKET_IFNAME=\^?=?{INTERFACE}(?:,{INTERFACE}){{0,15}}", "NCCL_SOCKET_IFNAME=interface prefixes"
    ),
    "nccl_ib_hca": Placeholder(rf"NCCL_IB_HCA=\^?=?{HCA_ENTRY}(?:,{HCA_ENTRY}){{0,31}}", "NCCL_IB_HCA=devices"),
    "nccl_ib_gid_index": Placeholder(r"NCCL_IB_GID_INDEX=[0-9]{1,3}", "NCCL_IB_GID_INDEX=a number"),
    # A profiler trace or Horovod timeline on a node: an absolute path of plain segments (none starting with a dot,
    # so no `..`), ending .json or .json.gz; the size bound it is read with.
    "trace_file": Placeholder(
        r"(?:/[A-Za-z0-9_@+-][A-Za-z0-9_.@+-]{0,127}){0,31}/[A-Za-z0-9_@+-][A-Za-z0-9_.@+-]{0,122}\.json(?:\.gz)?",
        "an absolute path to a .json or .json.gz file (letters, digits, _ . @ + -; no segment starting with a dot)",
        slashes=True,
    ),
    "max_bytes": Placeholder(r"[0-9]{1,11}", "a size in bytes"),
}.items():
    register_placeholder(_name, _placeholder)

NCCL_ARGS = ("-b", "{nccl_bytes}", "-e", "{nccl_max_bytes}", "-f", "{nccl_step_factor}", "-n", "{nccl_iters}")
COMMANDS = (
    Command(
        "nccl-tests-node",
        ("{nccl_binary}", *NCCL_ARGS, "-g", "{gpus}"),
        "nccl-tests on one node, one process driving its GPUs.",
        timeout=NCCL_TIMEOUT,
        placeholders=("nccl_binary", "nccl_bytes", "nccl_max_bytes", "nccl_step_factor", "nccl_iters", "gpus"),
    ),
    Command(
        "mpirun-nccl-tests",
        (
            "sh",
            "-c",
            MPIRUN_HOSTFILE_SCRIPT,
            "rackpilot-mpirun",
            "{mpi_hosts}",
            "--allow-run-as-root",
            "--tag-output",
            "-np",
            "{mpi_np}",
            "-N",
            "{gpus}",
            "-x",
            "{nccl_socket_ifname}",
            "-x",
            "{nccl_ib_hca}",
            "-x",
            "{nccl_ib_gid_index}",
            "--bind-to",
            "numa",
            "{nccl_binary}",
            *NCCL_ARGS,
            "-g",
            "1",
        ),
        "nccl-tests across hosts: a hostfile written on the launcher, one process per GPU (-N per node) started by "
        "Open MPI, bound to its NUMA node, with the NCCL environment passed by -x.",
        timeout=NCCL_TIMEOUT,
        placeholders=(
            "mpi_hosts",
            "mpi_np",
            "gpus",
            "nccl_socket_ifname",
            "nccl_ib_hca",
            "nccl_ib_gid_index",
            "nccl_binary",
            "nccl_bytes",
            "nccl_max_bytes",
            "nccl_step_factor",
            "nccl_iters",
        ),
    ),
)
for _command in COMMANDS:
    if _command.name not in CATALOGUE:
        register_command(_command)

STEP = "nccl"


class TestSpecSerializer(serializers.Serializer):
    hosts = serializers.ListField(
        child=serializers.RegexField(rf"^{HOSTNAME}\Z"),
        min_length=1,
        max_length=MAX_MPI_HOSTS,
        help_text="Launcher first.",
    )
    purpose = serializers.ChoiceField(choices=Purpose.choices, default=Purpose.RUN)
    subject = serializers.CharField(required=False, allow_blank=True, default="", max_length=253)
    partner = serializers.CharField(required=False, allow_blank=True, default="", max_length=253)
    rails = serializers.BooleanField(default=False, help_text="Also test each RDMA device alone and read the links.")


class NcclTestsParameters(serializers.Serializer):
    collective = serializers.ChoiceField(choices=Collective.choices, default=Collective.ALL_REDUCE)
    min_bytes = serializers.IntegerField(min_value=MIN_BYTES, max_value=MAX_BYTES, default=MIN_BYTES)
    max_bytes = serializers.IntegerField(min_value=MIN_BYTES, max_value=MAX_BYTES, default=MAX_BYTES)
    step_factor = serializers.IntegerField(min_value=2, max_value=16, default=2)
    iterations = serializers.IntegerField(
        min_value=1, max_value=MAX_ITERATIONS, default=ITERATIONS, help_text="nccl-tests -n: timed iterations per size."
    )
    gpus_per_node = serializers.IntegerField(min_value=1, max_value=16, default=8)
    socket_ifname = serializers.RegexField(
        rf"^\^?=?{INTERFACE}(?:,{INTERFACE}){{0,15}}\Z", default="^lo,docker", help_text="NCCL_SOCKET_IFNAME."
    )
    ib_hca = serializers.RegexField(
        rf"^\^?=?{HCA_ENTRY}(?:,{HCA_ENTRY}){{0,31}}\Z", default="mlx5", help_text="NCCL_IB_HCA."
    )
    ib_gid_index = serializers.IntegerField(min_value=0, max_value=255, default=3, help_text="NCCL_IB_GID_INDEX.")
    tests = TestSpecSerializer(many=True, required=False, default=list, help_text="Empty: each target alone.")
    cooldown_seconds = serializers.FloatField(
        min_value=0, max_value=3600, default=0, help_text="Wait this long before the tests (a re-test's cool-down)."
    )

    def validate(self, data):
        if data["min_bytes"] > data["max_bytes"]:
            raise serializers.ValidationError({"min_bytes": ["The smallest size is above the largest."]})
        return data


def node_argv(parameters: dict) -> list[str]:
    return CATALOGUE["nccl-tests-node"].build(
        nccl_binary=f"{parameters['collective']}_perf",
        nccl_bytes=parameters["min_bytes"],
        nccl_max_bytes=parameters["max_bytes"],
        nccl_step_factor=parameters["step_factor"],
        nccl_iters=parameters.get("iterations", ITERATIONS),  # a job queued before -n was a parameter
        gpus=parameters["gpus_per_node"],
    )


def mpirun_argv(parameters: dict, hosts: list[str], *, ib_hca: str | None = None) -> list[str]:
    gpus = parameters["gpus_per_node"]
    return CATALOGUE["mpirun-nccl-tests"].build(
        mpi_hosts=",".join(f"{host}:{gpus}" for host in hosts),
        mpi_np=gpus * len(hosts),
        gpus=gpus,
        nccl_socket_ifname=f"NCCL_SOCKET_IFNAME={parameters['socket_ifname']}",
        nccl_ib_hca=f"NCCL_IB_HCA={ib_hca or parameters['ib_hca']}",
        nccl_ib_gid_index=f"NCCL_IB_GID_INDEX={parameters['ib_gid_index']}",
        nccl_binary=f"{parameters['collective']}_perf",
        nccl_bytes=parameters["min_bytes"],
        nccl_max_bytes=parameters["max_bytes"],
        nccl_step_factor=parameters["step_factor"],
        nccl_iters=parameters.get("iterations", ITERATIONS),  # a job queued before -n was a parameter
    )


@register_kind
class NcclTests(JobKind):
    name = "nccl-tests"
    label = "NCCL tests"
    description = (
        "nccl-tests (all_reduce, all_gather, reduce_scatter, alltoall, sendrecv, broadcast) on each node alone, or "
        "launched with mpirun across the hosts of each test; every row is kept and the bus bandwidth at the largest "
        "size is judged against the SKU's reference, the accepted baseline and the fleet."
    )
    parameters = NcclTestsParameters
    transports = ("ssh", "sim")

    def __init__(self):
        self.parameters: dict = {}
        self.tests: dict[str, dict] = {}  # launcher -> its test spec
        self.links: dict[str, list[dict]] = {}  # launcher -> its data NICs as the inventory has them
        self.outputs: dict[tuple[str, str], dict] = {}  # (launcher, step) -> parsed readings, filled by the runner

    def steps(self, parameters: dict) -> list[StepSpec]:
        timeout = NCCL_TIMEOUT * 2 + parameters.get("cooldown_seconds", 0)
        return [StepSpec(STEP, "", "nccl-tests", timeout=timeout, stop_on_failure=False)]

    def prepare(self, job, shard) -> None:
        self.parameters = job.parameters
        self.tests = {test["hosts"][0]: test for test in job.parameters.get("tests") or []}
        self.links = recording.data_links([test["hosts"][0] for test in self.tests.values() if test.get("rails")])

    def step_runner(self, step: StepSpec):
        async def run_test(target: NodeTarget, run) -> CommandResult:
            # The cool-down is waited here, inside the round's job, so that canceling the job (or its run) ends it.
            cooldown = self.parameters.get("cooldown_seconds", 0)
            if cooldown and await wait_unless_canceled(cooldown):
                return CommandResult(canceled=True, error="canceled during the cool-down")
            test = self.tests.get(target.hostname)
            if test is None or len(test["hosts"]) == 1:
                argv = node_argv(self.parameters)
            else:
                argv = mpirun_argv(self.parameters, test["hosts"])
            result = await run(argv, NCCL_TIMEOUT)
            reading = {
                "command": argv,
                "exit_code": result.exit_code,
                "error": result.error or "",
                "timed_out": result.timed_out,
                "stdout": result.stdout.decode("utf-8", errors="replace"),
                "stderr": result.stderr.decode("utf-8", errors="replace")[-4000:],
            }
            if test is not None and test.get("rails") and result.ok:
                reading |= await self._rails(target, run, test)
            self.outputs[target.hostname, step.name] = reading
            return result

        return run_test

    async def _rails(self, target: NodeTarget, run, test: dict) -> dict:
        """One test per RDMA device of the launcher, then its links as the node reports them."""
        rails: dict[str, float | None] = {}
        links = self.links.get(target.hostname, [])
        for link in links:
            result = await run(mpirun_argv(self.parameters, test["hosts"], ib_hca=f"={link['device']}"), NCCL_TIMEOUT)
            rails[link["device"]] = _busbw(result)
        readings = {"rails": rails, "ip_link": "", "ethtool": {}, "mlnx_qos": {}}
        ip_link = await run(CATALOGUE["ip-link"].build(), 30.0)
        readings["ip_link"] = ip_link.stdout.decode("utf-8", errors="replace") if ip_link.ok else ""
        for link in links:
            for key, command in (("ethtool", "ethtool"), ("mlnx_qos", "mlnx-qos")):
                result = await run(CATALOGUE[command].build(interface=link["nic"]), 30.0)
                readings[key][link["nic"]] = result.stdout.decode("utf-8", errors="replace") if result.ok else ""
        return readings

    def cell_record(self, target: NodeTarget, step: StepSpec, result: CommandResult) -> CellRecord:
        if result.canceled:
            return CellRecord(StepStatus.CANCELED, "canceled")
        text = result.stdout.decode("utf-8", errors="replace")
        try:
            parsed = parse_nccl_tests(text) if text.strip() else None
        except ParseError as error:
            parsed, why = None, f"output not understood ({error})"
        else:
            why = ""
        size, busbw = judging.figure(parsed) if parsed else (None, None)
        if busbw is None:
            reason = why or (parsed.errors[0] if parsed and parsed.errors else default_summary(step, result))
            return CellRecord(StepStatus.ERROR, f"could not run: {reason}"[:300])
        status = StepStatus.SUCCEEDED if result.ok else default_status(result)
        return CellRecord(status, f"busbw {busbw:g} GB/s at {size} B", {"busbw_gb_per_s": busbw, "size_bytes": size})

    def shard_finished(self, job, shard) -> None:
        recording.record_shard(job=job, shard=shard, step=STEP, readings=self.outputs, links=self.links)


def _busbw(result: CommandResult) -> float | None:
    if not result.ok:
        return None
    try:
        return judging.figure(parse_nccl_tests(result.stdout.decode("utf-8", errors="replace")))[1]
    except ParseError:
        return None


# --- the NIC error counters read around a bandwidth test -------------------------------------------------------

COUNTERS_STEP = "counters"
# The mlx5 PHY counters a bad cable or transceiver moves (ethtool -S): frames that failed their FCS check, symbol
# errors the FEC could not correct; and the frames received, to make a rate of them.
ERROR_COUNTERS = ("rx_crc_errors_phy", "rx_symbol_err_phy")
FRAMES_COUNTER = "rx_packets"


@register_kind
class NicCounters(JobKind):
    name = "nic-counters"
    label = "NIC error counters"
    description = (
        "Reads ethtool -S of every RDMA data NIC of each node (CRC/FCS and symbol errors, frames received); run "
        "before and after a bandwidth test, the counters that grew name the cable."
    )
    transports = ("ssh", "sim")
    rerun_on_worker_loss = True  # read-only

    def __init__(self):
        self.links: dict[str, list[dict]] = {}
        self.readings: dict[str, dict[str, dict | None]] = {}  # host -> NIC -> the counters kept (None: unread)

    def steps(self, parameters: dict) -> list[StepSpec]:
        return [StepSpec(COUNTERS_STEP, "", "ethtool -S of each data NIC", timeout=300.0, stop_on_failure=False)]

    def prepare(self, job, shard) -> None:
        self.links = recording.data_links(list(shard.steps.values_list("hostname", flat=True)))

    def step_runner(self, step: StepSpec):
        async def read(target: NodeTarget, run) -> CommandResult:
            transcript, readings, failed = [], {}, False
            for link in self.links.get(target.hostname, []):
                argv = CATALOGUE["ethtool-stats"].build(interface=link["nic"])
                result = await run(argv, 30.0)
                if result.canceled:
                    return result
                text = result.stdout.decode("utf-8", errors="replace")
                transcript.append(f"$ {' '.join(argv)}\n{text}")
                readings[link["nic"]] = _kept_counters(text) if result.ok else None
                failed = failed or readings[link["nic"]] is None
            self.readings[target.hostname] = readings
            stdout = "\n".join(transcript).encode()
            return CommandResult(exit_code=1 if failed else 0, stdout=stdout, stdout_size=len(stdout))

        return read

    def cell_record(self, target: NodeTarget, step: StepSpec, result: CommandResult) -> CellRecord:
        readings = self.readings.get(target.hostname)
        if readings is None:
            return super().cell_record(target, step, result)
        unread = sorted(nic for nic, counters in readings.items() if counters is None)
        summary = f"{counted(len(readings) - len(unread), 'NIC')} read" + (
            f"; not read: {', '.join(unread)}" if unread else ""
        )
        return CellRecord(StepStatus.SUCCEEDED if not unread else StepStatus.FAILED, summary)

    def shard_finished(self, job, shard) -> None:
        for hostname, readings in sorted(self.readings.items()):
            emit(job, f"NIC counters of {hostname}", hostname=hostname, step=COUNTERS_STEP, data={"nics": readings})


def _kept_counters(text: str) -> dict | None:
    try:
        counters = parse_ethtool_stats(text).counters
    except ParseError:
        return None
    return {name: counters[name] for name in (*ERROR_COUNTERS, FRAMES_COUNTER) if name in counters}


# --- the per-node suites: HPL-MxP, nvbandwidth, burn-in -----------------------------------------------------------

HPL_TIMEOUT = 3600.0
NVBANDWIDTH_TIMEOUT = 1800.0
SOAK_GRACE = 600.0  # a soak's step may run this much past its duration (start-up, the samples' copy)
NODE_COMMANDS = (
    Command(
        "hpl-classic",
        (
            "sh",
            "-c",
            HPL_SCRIPT,
            "rackpilot-hpl",
            "{hpl_n}",
            "{hpl_nb}",
            "{hpl_p}",
            "{hpl_q}",
            "{mpi_np}",
            "{mpi_hosts}",
        ),
        "Classic HPL (FP64; NVIDIA HPC-Benchmarks' hpl.sh): HPL.dat written for one order, block and grid, then one "
        "process per GPU over the hosts with mpirun.",
        timeout=HPL_TIMEOUT,
        placeholders=("hpl_n", "hpl_nb", "hpl_p", "hpl_q", "mpi_np", "mpi_hosts"),
    ),
    Command(
        "mpirun-hpl-mxp",
        (
            "mpirun",
            "--allow-run-as-root",
            "-np",
            "{mpi_np}",
            "-H",
            "{mpi_hosts}",
            "--bind-to",
            "none",
            "--map-by",
            "slot",
            "hpl-mxp.sh",
            "--n",
            "{hpl_n}",
            "--nb",
            "{hpl_nb}",
            "--nprow",
            "{hpl_p}",
            "--npcol",
            "{hpl_q}",
            "--nporder",
            "row",
            "--gpu-affinity",
            "{gpu_affinity}",
        ),
        "HPL-MxP (NVIDIA HPC-Benchmarks) over the GPUs of one node or a set, one process per GPU.",
        timeout=HPL_TIMEOUT,
        placeholders=("mpi_np", "mpi_hosts", "hpl_n", "hpl_nb", "hpl_p", "hpl_q", "gpu_affinity"),
    ),
    Command(
        "nvbandwidth-cases",
        ("nvbandwidth", "-t", "{nvbandwidth_cases}"),
        "nvbandwidth's copy test cases: host<->device, device<->device, local HBM.",
        timeout=NVBANDWIDTH_TIMEOUT,
        placeholders=("nvbandwidth_cases",),
    ),
    Command(
        "burn-in-soak",
        ("sh", "-c", SOAK_SCRIPT, "rackpilot-soak", "{number}", "{interval_ms}"),
        "gpu_burn for N seconds while nvidia-smi samples temperature, clocks, power and clocks-event reasons.",
        timeout=BURN_IN_MAX_SECONDS + SOAK_GRACE,
        placeholders=("number", "interval_ms"),
    ),
    Command(
        "dcgm-soak",
        ("sh", "-c", DCGM_SOAK_SCRIPT, "rackpilot-soak", "{dcgm_level}", "{interval_ms}"),
        "dcgmi diag -r 3 or 4 while nvidia-smi samples temperature, clocks, power and clocks-event reasons.",
        timeout=DCGM_NOMINAL_SECONDS[4] + SOAK_GRACE,
        placeholders=("dcgm_level", "interval_ms"),
    ),
)
for _command in NODE_COMMANDS:
    if _command.name not in CATALOGUE:
        register_command(_command)

NODE_STEP = "bench"


class NodeTestSerializer(serializers.Serializer):
    hosts = serializers.ListField(
        child=serializers.RegexField(rf"^{HOSTNAME}\Z"),
        min_length=1,
        max_length=MAX_MPI_HOSTS,
        help_text="Launcher first.",
    )
    hpl_n = serializers.IntegerField(min_value=HPL_MIN_N, max_value=HPL_MAX_N, required=False)


class NodeBenchmarkParameters(serializers.Serializer):
    suite = serializers.ChoiceField(choices=sorted(NODE_SUITES))
    gpus_per_node = serializers.IntegerField(min_value=1, max_value=16, default=8)
    hpl_n = serializers.IntegerField(min_value=HPL_MIN_N, max_value=HPL_MAX_N, default=HPL_MIN_N)
    hpl_nb = serializers.IntegerField(min_value=64, max_value=4096, default=HPL_NB)
    cases = serializers.ListField(
        child=serializers.ChoiceField(choices=suites.NVBANDWIDTH_CASES),
        min_length=1,
        default=list(suites.NVBANDWIDTH_CASES),
    )
    duration_seconds = serializers.IntegerField(
        min_value=BURN_IN_MIN_SECONDS, max_value=BURN_IN_MAX_SECONDS, default=BURN_IN_DEFAULT_SECONDS
    )
    burn_load = serializers.ChoiceField(choices=BurnLoad.choices, default=BurnLoad.GPU_BURN)
    tests = NodeTestSerializer(many=True, required=False, default=list, help_text="Empty: each target alone.")


@register_kind
class NodeBenchmark(JobKind):
    name = "node-benchmark"
    label = "Node benchmark"
    description = (
        "HPL-MxP, nvbandwidth or a burn-in soak on each node alone (HPL-MxP also launched across the hosts of a "
        "test); the figures are judged against the SKU's reference, the accepted baseline and the fleet."
    )
    parameters = NodeBenchmarkParameters
    transports = ("ssh", "local", "sim")

    def __init__(self):
        self.parameters: dict = {}
        self.tests: dict[str, dict] = {}  # launcher -> its test spec
        self.outputs: dict[tuple[str, str], dict] = {}  # (launcher, step) -> what the command printed

    def steps(self, parameters: dict) -> list[StepSpec]:
        timeout = {
            Suite.HPL_MXP: HPL_TIMEOUT,
            Suite.HPL: HPL_TIMEOUT,
            Suite.NVBANDWIDTH: NVBANDWIDTH_TIMEOUT,
            Suite.BURN_IN: _soak_seconds(parameters) + SOAK_GRACE,
        }[parameters["suite"]]
        return [StepSpec(NODE_STEP, "", parameters["suite"], timeout=timeout, stop_on_failure=False)]

    def prepare(self, job, shard) -> None:
        self.parameters = job.parameters
        self.tests = {test["hosts"][0]: test for test in job.parameters.get("tests") or []}

    def argv(self, hostname: str) -> list[str]:
        parameters = self.parameters
        suite = parameters["suite"]
        if suite == Suite.HPL_MXP:
            test = self.tests.get(hostname) or {"hosts": [hostname]}
            return suites.hpl_mxp_argv(parameters, test["hosts"], test.get("hpl_n") or parameters["hpl_n"])
        if suite == Suite.HPL:
            test = self.tests.get(hostname) or {"hosts": [hostname]}
            return suites.hpl_argv(parameters, test["hosts"], test.get("hpl_n") or parameters["hpl_n"])
        if suite == Suite.NVBANDWIDTH:
            return suites.nvbandwidth_argv(parameters)
        return suites.soak_argv(parameters)

    def step_runner(self, step: StepSpec):
        async def run_suite(target: NodeTarget, run) -> CommandResult:
            argv = self.argv(target.hostname)
            result = await run(argv, step.timeout)
            self.outputs[target.hostname, step.name] = {
                "command": argv,
                "exit_code": result.exit_code,
                "error": result.error or "",
                "timed_out": result.timed_out,
                "stdout": result.stdout.decode("utf-8", errors="replace"),
                "stderr": result.stderr.decode("utf-8", errors="replace")[-4000:],
            }
            return result

        return run_suite

    def cell_record(self, target: NodeTarget, step: StepSpec, result: CommandResult) -> CellRecord:
        if result.canceled:
            return CellRecord(StepStatus.CANCELED, "canceled")
        reading = self.outputs.get((target.hostname, step.name)) or {}
        stdout, stderr = reading.get("stdout", ""), reading.get("stderr", "")
        try:
            found = (
                suites.figures(
                    self.parameters["suite"], stdout, stderr, burn_load=self.parameters.get("burn_load", "gpu-burn")
                )
                if stdout.strip()
                else []
            )
        except ParseError as error:
            return CellRecord(StepStatus.ERROR, f"could not run: output not understood ({error})"[:300])
        measured = [figure for figure in found if figure.value is not None]
        if not measured:
            notes = [note for figure in found for note in figure.notes[1:]]
            reason = (notes or [default_summary(step, result)])[0]
            return CellRecord(StepStatus.ERROR, f"could not run: {reason}"[:300])
        status = StepStatus.SUCCEEDED if result.ok else default_status(result)
        summary = "; ".join(f"{figure.case} {figure.value:g} {figure.unit}" for figure in measured[:3])
        return CellRecord(status, summary[:300], {figure.case: figure.value for figure in measured})

    def shard_finished(self, job, shard) -> None:
        recording.record_measurements(job=job, shard=shard, step=NODE_STEP, readings=self.outputs)


def _soak_seconds(parameters: dict) -> float:
    """How long a soak loads the GPUs: its duration, or the nominal length of the dcgmi diag level."""
    load = parameters.get("burn_load") or BurnLoad.GPU_BURN
    if load in DCGM_LEVELS:
        return float(DCGM_NOMINAL_SECONDS[DCGM_LEVELS[load]])
    return float(parameters.get("duration_seconds", BURN_IN_DEFAULT_SECONDS))


# --- a training timeline read off the nodes it was written on --------------------------------------------------

TRACE_STEP = "trace"
TRACE_READ_TIMEOUT = 600.0  # one file: 64 MiB as base64 over a slow management link
# What the read may print: the header line, then base64 (4 characters per 3 bytes, a newline every 76).
TRACE_OUTPUT_CAP = 128 + -(-TIMELINE_MAX_FILE_BYTES // 3) * 4 * 77 // 76

register_command(
    Command(
        "trace-read",
        ("sh", "-c", TRACE_READ_SCRIPT, "rackpilot-trace", "{trace_file}", "{max_bytes}"),
        "A profiler trace or Horovod timeline (.json, .json.gz) as base64, refused when missing or too large.",
        timeout=TRACE_READ_TIMEOUT,
        placeholders=("trace_file", "max_bytes"),
    )
)


class TraceFileSerializer(serializers.Serializer):
    node = serializers.RegexField(rf"^{HOSTNAME}\Z", help_text="The node the file is on.")
    path = serializers.RegexField(
        rf"^{PLACEHOLDERS['trace_file'].pattern}\Z",
        max_length=4096,
        help_text="Absolute path of a .json or .json.gz trace.",
        error_messages={"invalid": PLACEHOLDERS["trace_file"].description},
    )


class TimelineTraceParameters(serializers.Serializer):
    files = TraceFileSerializer(many=True, min_length=1, max_length=TIMELINE_MAX_FILES, help_text="In rank order.")
    name = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    training_job = serializers.IntegerField(min_value=1, required=False, allow_null=True, default=None)


class TraceRefused(Exception):
    pass


def decode_trace(result: CommandResult, name: str):
    """A trace-read's output as the parsed trace and its file facts; TraceRefused saying why not."""
    stderr = result.stderr.decode("utf-8", errors="replace").strip()
    if result.error:
        raise TraceRefused(result.error)
    if result.timed_out:
        raise TraceRefused(f"{name}: the read timed out after {TRACE_READ_TIMEOUT:g} s")
    if result.exit_code != 0:
        raise TraceRefused(stderr.splitlines()[-1] if stderr else f"{name}: exit {result.exit_code}")
    header, _, body = result.stdout.partition(b"\n")
    words = header.decode("ascii", errors="replace").rsplit(" ", 1)
    if words[0] != TRACE_HEADER or not words[-1].isdigit():
        raise TraceRefused(f"{name}: the node's answer does not start with the size line")
    if result.stdout_size > len(result.stdout):
        raise TraceRefused(f"{name}: more output than {TRACE_OUTPUT_CAP} bytes; refused")
    try:
        data = binascii.a2b_base64(body)
    except binascii.Error as error:
        raise TraceRefused(f"{name}: the transfer is not base64 ({error})") from None
    if len(data) != int(words[-1]):
        raise TraceRefused(f"{name}: the transfer is cut off ({len(data)} of {words[-1]} bytes)")
    try:
        return timelines.read_one(io.BytesIO(data), name)
    except serializers.ValidationError as error:
        raise TraceRefused(str(error.detail["files"][0])) from None


@register_kind
class TimelineTrace(JobKind):
    name = "timeline-trace"
    label = "Timeline from nodes"
    description = (
        "Reads PyTorch profiler traces or a Horovod timeline (.json or .json.gz) off the nodes a training run wrote "
        "them on and stores their compute / communication / idle breakdown as a timeline analysis."
    )
    parameters = TimelineTraceParameters
    transports = ("ssh",)  # the files are named by users: read on their nodes, never the worker's own host
    rerun_on_worker_loss = True  # read-only; the analysis is stored once, by the shard that ends

    def __init__(self):
        self.files: list[dict] = []
        self.read: dict[int, tuple] = {}  # file position -> (trace, facts)
        self.refused: dict[str, str] = {}  # host -> why its files could not be read

    def steps(self, parameters: dict) -> list[StepSpec]:
        return [StepSpec(TRACE_STEP, "", "read the trace files", timeout=TRACE_READ_TIMEOUT * 8)]

    def check_nodes(self, nodes: list, parameters: dict) -> None:
        missing = sorted({file["node"] for file in parameters["files"]} - {node.hostname for node in nodes})
        if missing:
            raise serializers.ValidationError(
                {"targets": [f"The files name nodes not targeted: {', '.join(missing)}."]}
            )

    def prepare(self, job, shard) -> None:
        self.files = job.parameters["files"]

    def step_runner(self, step: StepSpec):
        async def read_files(target: NodeTarget, run) -> CommandResult:
            mine = [
                (position, file["path"]) for position, file in enumerate(self.files) if file["node"] == target.hostname
            ]
            lines = []
            for position, path in mine:
                argv = CATALOGUE["trace-read"].build(trace_file=path, max_bytes=TIMELINE_MAX_FILE_BYTES)
                result = await run(argv, TRACE_READ_TIMEOUT, live=False, cap=TRACE_OUTPUT_CAP)
                if result.canceled:
                    return result
                try:
                    self.read[position] = await asyncio.to_thread(decode_trace, result, f"{target.hostname}:{path}")
                except TraceRefused as error:
                    self.refused[target.hostname] = str(error)
                    message = f"{error}\n".encode()
                    return CommandResult(exit_code=result.exit_code or 1, stderr=message, stderr_size=len(message))
                facts = self.read[position][1]
                lines.append(f"{facts['name']}: {facts['bytes']} bytes, {facts['events']} events, rank {facts['rank']}")
            stdout = "".join(f"{line}\n" for line in lines).encode()
            return CommandResult(exit_code=0, stdout=stdout, stdout_size=len(stdout))

        return read_files

    def cell_record(self, target: NodeTarget, step: StepSpec, result: CommandResult) -> CellRecord:
        if target.hostname in self.refused:
            return CellRecord(StepStatus.FAILED, self.refused[target.hostname][:300])
        if not result.ok:
            return super().cell_record(target, step, result)
        count = sum(1 for file in self.files if file["node"] == target.hostname)
        return CellRecord(StepStatus.SUCCEEDED, f"read {counted(count, 'trace file')}")

    def shard_finished(self, job, shard) -> None:
        if len(self.read) != len(self.files):
            reasons = "; ".join(f"{host}: {why}" for host, why in sorted(self.refused.items())) or "not every file read"
            emit(job, f"no timeline analysis stored: {reasons}"[:2000], level=EventLevel.ERROR, step=TRACE_STEP)
            return
        read = [self.read[position] for position in range(len(self.files))]
        try:
            analysis = timelines.store_read(job=job, read=read)
        except serializers.ValidationError as error:
            emit(job, f"no timeline analysis stored: {error.detail['files'][0]}", level=EventLevel.ERROR)
            return
        emit(
            job,
            f"timeline analysis stored: {analysis.name}",
            step=TRACE_STEP,
            data={"analysis": str(analysis.public_id)},
        )
