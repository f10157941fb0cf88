"""nccl-tests (all_reduce_perf and friends), text output as version 2.19.6 prints it, on one node or across several.

Times come from model.RingModel: latency per ring step plus bytes over the slowest link's bandwidth; algbw and busbw
are then computed from the time exactly as nccl-tests does (busbw = algbw x the collective's factor).
"""

from dataclasses import dataclass, replace

from apps.simulator.digits import decimal_number, integer, whole_number
from apps.simulator.model import BUSBW_FACTORS, jitter, noise, ring_model
from apps.simulator.state import NCCL_TESTS_VERSION, SimulatedNode, cuda_version_code, nccl_version_code
from apps.simulator.terminal import CommandOutput, Context

COLLECTIVES = tuple(BUSBW_FACTORS)
BINARIES = {f"{name}_perf": name for name in COLLECTIVES}
REDUCING = {"all_reduce", "reduce_scatter", "reduce"}
PER_RANK_COUNT = {"all_gather", "reduce_scatter"}
SPLIT_ACROSS_RANKS = {"all_gather", "reduce_scatter", "alltoall"}
DTYPE_BYTES = {"float": 4, "half": 2, "bfloat16": 2, "double": 8, "int32": 4, "int8": 1, "uint8": 1}

TABLE_HEADER = """\
#                                                              out-of-place                       in-place          
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong 
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)         
"""  # noqa: W291 - nccl-tests pads these lines with spaces


NCCL_CONF = "/etc/nccl.conf"


class UsageError(ValueError):
    pass


# --- NCCL settings and socket interfaces ---------------------------------------------------------------------------


def nccl_settings(state: SimulatedNode, env: dict[str, str] | None = None) -> dict[str, str]:
    """NCCL_* settings as NCCL sees them: NAME=VALUE lines of /etc/nccl.conf, then the environment (which wins)."""
    settings = {}
    for line in state.files.get(NCCL_CONF, "").splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            name, _, value = line.partition("=")
            settings[name.strip()] = value.strip()
    settings.update(env or {})
    return settings


def socket_interfaces(state: SimulatedNode) -> list[tuple[str, str]]:
    """(name, IPv4 address) of the node's interfaces in kernel order, as getifaddrs lists them."""
    node = state.node_id or 0
    found = [("lo", "127.0.0.1")]
    found += [
        (nic.name, f"10.{100 + position}.{node // 250 % 250}.{node % 250 + 1}")
        for position, nic in enumerate(state.nics)
    ]
    return found


def select_interfaces(state: SimulatedNode, ifname: str | None) -> list[tuple[str, str]]:
    """The interfaces NCCL's socket transport uses: NCCL_SOCKET_IFNAME is a comma list of name prefixes, '^' in
    front excludes them, '=' in front (after any '^') makes them exact names. Unset: ib* first, else all but lo and
    docker*."""
    interfaces = socket_interfaces(state)
    if not ifname:
        preferred = [interface for interface in interfaces if interface[0].startswith("ib")]
        return preferred or [
            interface for interface in interfaces if not interface[0].startswith(("lo", "docker", "virbr"))
        ]
    return [interface for interface in interfaces if ifname_selects(ifname, interface[0])]


def ifname_selects(spec: str, name: str) -> bool:
    """Whether NCCL_SOCKET_IFNAME picks interface `name`, as NCCL's parseStringList and matchIfList read it.

    The value is a comma list of "prefix[:port]"; a leading '^' inverts the match, then a leading '=' makes each
    entry an exact name. Ports never match here: the simulated interfaces listen on none, so NCCL ignores them.
    """
    exclude = spec.startswith("^")
    spec = spec[1:] if exclude else spec
    exact = spec.startswith("=")
    spec = spec[1:] if exact else spec
    prefixes = [entry.partition(":")[0] for entry in spec.split(",") if entry]
    matched = any(name == prefix if exact else name.startswith(prefix) for prefix in prefixes)
    return matched != exclude


def ib_devices(state: SimulatedNode, spec: str | None) -> SimulatedNode:
    """The node as NCCL's IB transport sees it under NCCL_IB_HCA (same list syntax as NCCL_SOCKET_IFNAME, matched
    on the RDMA device name: mlx5_3, ^mlx5_0, =mlx5_1:1): only the data NICs it selects carry the rings."""
    if not spec:
        return state
    nics = [nic for nic in state.nics if not nic.is_data or (nic.rdma_device and ifname_selects(spec, nic.rdma_device))]
    return replace(state, nics=nics)


def _debug_level(settings: dict[str, str]) -> str:
    return settings.get("NCCL_DEBUG", "").upper()


@dataclass(frozen=True)
class NcclArgs:
    min_bytes: int = 33554432
    max_bytes: int = 33554432
    step_factor: int = 1
    step_bytes: int = 1048576
    gpus: int = 1
    threads: int = 1
    iters: int = 20
    warmup: int = 1
    check: int = 1
    dtype: str = "float"
    op: str = "sum"
    root: int = 0


def parse_size(text: str) -> int:
    """nccl-tests sizes: a number with an optional K, M or G (powers of 1024)."""
    units = {"K": 2**10, "M": 2**20, "G": 2**30}
    suffix = text[-1:].upper()
    try:
        return int(decimal_number(text[:-1]) * units[suffix]) if suffix in units else whole_number(text)
    except ValueError:
        raise UsageError(f"invalid size '{text}'") from None


def parse_args(args: list[str]) -> NcclArgs:
    values: dict = {}
    options = {
        "-b": ("min_bytes", parse_size),
        "--minbytes": ("min_bytes", parse_size),
        "-e": ("max_bytes", parse_size),
        "--maxbytes": ("max_bytes", parse_size),
        "-f": ("step_factor", integer),
        "--stepfactor": ("step_factor", integer),
        "-i": ("step_bytes", parse_size),
        "--stepbytes": ("step_bytes", parse_size),
        "-g": ("gpus", integer),
        "--ngpus": ("gpus", integer),
        "-t": ("threads", integer),
        "--nthreads": ("threads", integer),
        "-n": ("iters", integer),
        "--iters": ("iters", integer),
        "-w": ("warmup", integer),
        "--warmup_iters": ("warmup", integer),
        "-c": ("check", integer),
        "--check": ("check", integer),
        "-d": ("dtype", str),
        "--datatype": ("dtype", str),
        "-o": ("op", str),
        "--op": ("op", str),
        "-r": ("root", integer),
        "--root": ("root", integer),
    }
    ignored = {"-m", "-a", "-z", "-G", "-C", "-J", "-N", "-p", "-S", "-R", "-T", "-u"}
    position = 0
    while position < len(args):
        word = args[position]
        if word in options and position + 1 < len(args):
            name, convert = options[word]
            try:
                values[name] = convert(args[position + 1])
            except ValueError:
                raise UsageError(f"invalid value '{args[position + 1]}' for {word}") from None
            position += 2
        elif word in ignored:
            position += 2
        else:
            raise UsageError(f"invalid option '{word}'")
    if "step_factor" in values and "step_bytes" in values:
        values.pop("step_bytes")
    if values.get("dtype", "float") not in DTYPE_BYTES:
        raise UsageError(f"invalid type {values['dtype']}")
    return NcclArgs(**values)


def _sizes(args: NcclArgs) -> list[int]:
    sizes, size = [], args.min_bytes
    while size <= args.max_bytes:
        sizes.append(size)
        if args.step_factor > 1:
            size *= args.step_factor
        else:
            size += max(args.step_bytes, 1)
    return sizes


def float_cell(value: float, digits: int = 6) -> str:
    """nccl-tests' getFloatStr: as many decimals as fit in `digits` columns, then an exponent."""
    power, bound = 0, 1
    while value >= bound:
        power += 1
        bound *= 10
    if power < digits - 2:
        return f"{value:{digits}.2f}"
    if power < digits - 1:
        return f"{value:{digits}.1f}"
    if power < digits + 1:
        return f"{value:{digits}.0f}"
    return f"{value:{digits}.0e}"


def format_row(size, count, dtype, redop, root, placements: list[tuple[float, float, float, str]]) -> str:
    line = f"{size:>12}  {count:>12}  {dtype:>8}  {redop:>6}  {root:>6}"
    for time_us, algbw, busbw, wrong in placements:
        line += f"  {float_cell(time_us):>7}  {float_cell(algbw)}  {float_cell(busbw)}  {wrong:>6}"
    return line


@dataclass(frozen=True)
class Rank:
    host: SimulatedNode
    device: int
    pid: int


def _ranks(nodes: list[SimulatedNode], per_node: int, seed: int) -> list[Rank]:
    ranks = []
    for state in nodes:
        base = noise(seed, state.hostname, "pid").randint(20000, 60000)
        ranks += [Rank(state, device, base + device) for device in range(per_node)]
    return ranks


def _header(binary: str, args: NcclArgs, gpus_per_process: int, nccl_version: str) -> list[str]:
    step = f"{args.step_factor}(factor)" if args.step_factor > 1 else f"{args.step_bytes}(bytes)"
    code = nccl_version_code(nccl_version)
    return [
        f"# nccl-tests version {NCCL_TESTS_VERSION} nccl-headers={code} nccl-library={code}",
        f"# Collective test starting: {binary}",
        f"# nThread {args.threads} nGpus {gpus_per_process} minBytes {args.min_bytes} maxBytes {args.max_bytes} "
        f"step: {step} warmup iters: {args.warmup} iters: {args.iters} agg iters: 1 validation: {args.check} "
        "graph: 0 unalign: 0",
        "#",
        "# Using devices",
    ]


def _device_line(number: int, rank: Rank) -> str:
    gpu = rank.host.visible_gpus[rank.device]
    return (
        f"#  Rank {number:>2} Group  0 Pid {rank.pid:>6} on {rank.host.hostname:>10} device {rank.device:>2} "
        f"[{gpu.short_bus_id}] {gpu.facts.product_name}"
    )


def _info_lines(nodes: list[SimulatedNode], per_node: int, seed: int, settings: dict[str, str]) -> list[str]:
    """Rank 0's NCCL INFO lines from its start (NCCL_DEBUG=INFO): settings, version, the interface it uses."""
    state = nodes[0]
    pid = noise(seed, state.hostname, "pid").randint(20000, 60000)
    prefix = f"{state.hostname}:{pid}:{pid} [0] NCCL INFO "
    ifname = settings.get("NCCL_SOCKET_IFNAME")
    name, address = select_interfaces(state, ifname)[0]
    lines = []
    if ifname:
        lines += [f"NCCL_SOCKET_IFNAME set by environment to {ifname}", f"NCCL_SOCKET_IFNAME set to {ifname}"]
    lines += [
        f"cudaDriverVersion {cuda_version_code(state.driver_cuda)}",
        f"NCCL version {state.nccl_version}+cuda{state.cuda_toolkit}",
        f"NET/Socket : Using [0]{name}:{address}<0>",
        f"Using network {'IB' if state.rdma_nics and len(nodes) > 1 else 'Socket'}",
        f"comm 0x{pid:x}0 rank 0 nRanks {per_node * len(nodes)} nNodes {len(nodes)} localRanks {per_node} "
        "localRank 0 MNNVL 0",
    ]
    return [prefix + line for line in lines]


def _bootstrap_failure(
    nodes: list[SimulatedNode], per_node: int, seed: int, settings: list[dict[str, str]]
) -> tuple[int, list[str]] | None:
    """NCCL_SOCKET_IFNAME matches none of a node's interfaces: bootstrap fails in ncclGetUniqueId / comm init."""
    for state, node_settings in zip(nodes, settings, strict=True):
        ifname = node_settings.get("NCCL_SOCKET_IFNAME")
        if select_interfaces(state, ifname):
            continue
        pid = noise(seed, state.hostname, "pid").randint(20000, 60000)
        prefix = f"{state.hostname}:{pid}:{pid} [0] NCCL "
        lines = []
        level = _debug_level(node_settings)
        if level in ("INFO", "TRACE") and ifname:
            lines.append(f"{prefix}INFO NCCL_SOCKET_IFNAME set by environment to {ifname}")
        if level in ("WARN", "INFO", "TRACE"):
            lines.append(f"{prefix}WARN Bootstrap : no socket interface found")
        lines += [
            f"{state.hostname}: Test NCCL failure common.cu:1046 'internal error - please report this issue to the "
            "NCCL developers / '",
            f" .. {state.hostname} pid {pid}: Test failure common.cu:1454",
        ]
        return 3, lines
    return None


def _failure(nodes: list[SimulatedNode], per_node: int, seed: int) -> tuple[int, list[str]] | None:
    """What stops the run before its table, as nccl-tests reports it: (exit code, lines)."""
    for state in nodes:
        pid = noise(seed, state.hostname, "pid").randint(20000, 60000)
        visible = len(state.visible_gpus)
        if visible < per_node:
            if len(nodes) == 1:
                return 5, [
                    f"Invalid number of GPUs: {per_node} requested but only {visible} were found.",
                    "Please check the number of processes and GPUs per process.",
                    f" .. {state.hostname} pid {pid}: Test failure common.cu:1454",
                ]
            return 2, [
                f"{state.hostname}: Test CUDA failure common.cu:1016 'invalid device ordinal'",
                f" .. {state.hostname} pid {pid + visible}: Test failure common.cu:1454",
            ]
        if any(gpu.ecc_uncorrectable for gpu in state.visible_gpus[:per_node]):
            return 2, [
                f"{state.hostname}: Test CUDA failure common.cu:1092 'uncorrectable ECC error encountered'",
                f" .. {state.hostname} pid {pid}: Test failure common.cu:1454",
            ]
        if len(nodes) > 1 and not any(nic.link_up for nic in state.data_nics):
            return 3, [
                f"{state.hostname}:{pid}:{pid + 40} [0] NCCL INFO NET/IB : No device found.",
                f"{state.hostname}: Test NCCL failure common.cu:1046 'remote process exited or there was a network "
                "error / '",
                f" .. {state.hostname} pid {pid}: Test failure common.cu:1454",
            ]
    return None


def rail_traffic(
    nodes: list[SimulatedNode], binary: str, args: NcclArgs, env: dict[str, str] | None = None
) -> dict[str, dict[str, int]]:
    """Host -> data NIC -> the bytes it received during a run across nodes (as many as it sent). Per iteration a ring
    moves size x the collective's bus-bandwidth factor through every node; the warm-up and timed iterations of both
    placements run; the rings spread it evenly over the data NICs NCCL_IB_HCA selects whose link is up."""
    if len(nodes) < 2:
        return {}
    collective = BINARIES[binary]
    ranks = len(nodes) * args.gpus * args.threads
    factor = BUSBW_FACTORS[collective](ranks)
    per_node = sum(_sizes(args)) * factor * (args.warmup + args.iters) * 2
    traffic = {}
    for state in nodes:
        selected = ib_devices(state, nccl_settings(state, env).get("NCCL_IB_HCA"))
        rails = [nic.name for nic in selected.data_nics if nic.link_up]
        traffic[state.hostname] = {name: int(per_node / len(rails)) for name in rails}
    return traffic


def run_nccl_tests(
    nodes: list[SimulatedNode],
    binary: str,
    args: NcclArgs,
    *,
    seed: int = 0,
    per_process_gpus: int | None = None,
    env: dict[str, str] | None = None,
) -> CommandOutput:
    """nccl-tests over `nodes` with args.gpus x args.threads GPUs on each (one process per GPU across nodes).

    NCCL reads each node's /etc/nccl.conf, then `env` (NCCL_SOCKET_IFNAME, NCCL_DEBUG, ...), which wins.
    """
    collective = BINARIES[binary]
    per_node = args.gpus * args.threads
    header = _header(binary, args, per_process_gpus or args.gpus, nodes[0].nccl_version)
    failure = _failure(nodes, per_node, seed)
    if failure is not None:
        code, lines = failure
        return CommandOutput(code, "\n".join(header + lines) + "\n", "")
    settings = [nccl_settings(state, env) for state in nodes]
    ranks = _ranks(nodes, per_node, seed)
    lines = header + [_device_line(number, rank) for number, rank in enumerate(ranks)]
    failure = _bootstrap_failure(nodes, per_node, seed, settings)
    if failure is not None:
        code, failed = failure
        return CommandOutput(code, "\n".join(lines + failed) + "\n", "")
    if len(nodes) > 1:  # across nodes the rings run over the RDMA devices NCCL_IB_HCA selects
        nodes = [
            ib_devices(state, node_settings.get("NCCL_IB_HCA"))
            for state, node_settings in zip(nodes, settings, strict=True)
        ]
        for state in nodes:
            if not any(nic.link_up for nic in state.data_nics):
                pid = noise(seed, state.hostname, "pid").randint(20000, 60000)
                lines += [
                    f"{state.hostname}:{pid}:{pid + 40} [0] NCCL INFO NET/IB : No device found.",
                    f"{state.hostname}: Test NCCL failure common.cu:1046 'remote process exited or there was a "
                    "network error / '",
                    f" .. {state.hostname} pid {pid}: Test failure common.cu:1454",
                ]
                return CommandOutput(3, "\n".join(lines) + "\n", "")
    level = _debug_level(settings[0])
    if level in ("INFO", "TRACE"):
        lines += _info_lines(nodes, per_node, seed, settings[0])
    elif level == "VERSION":
        lines.append(f"NCCL version {nodes[0].nccl_version}+cuda{nodes[0].cuda_toolkit}")
    lines.append("#")
    lines += TABLE_HEADER.rstrip("\n").split("\n")
    model = ring_model(collective, nodes, per_node)
    word = DTYPE_BYTES[args.dtype]
    n = len(ranks)
    hosts = ",".join(state.hostname for state in nodes)
    bus_values, elapsed_us = [], 0.0
    for requested in _sizes(args):
        count = requested // word
        if collective in SPLIT_ACROSS_RANKS:
            count = count // n * n
        size = count * word
        printed_count = count // n if collective in PER_RANK_COUNT else count
        placements = []
        for placement in ("out", "in"):
            rng = noise(seed, hosts, collective, size, placement)
            time_us = jitter(rng, model.time_us(size), 0.01)
            algbw = size / time_us / 1e3
            busbw = algbw * model.busbw_factor()
            bus_values.append(busbw)
            elapsed_us += time_us * (args.warmup + args.iters)
            placements.append((time_us, algbw, busbw, "0" if args.check else "N/A"))
        redop = args.op if collective in REDUCING else "none"
        root = args.root if collective in ("broadcast", "reduce") else -1
        lines.append(format_row(size, printed_count, args.dtype, redop, root, placements))
    average = sum(bus_values) / len(bus_values) if bus_values else 0.0
    lines += [
        "# Out of bounds values : 0 OK",
        f"# Avg bus bandwidth    : {average:g} ",
        "#",
        f"# Collective test concluded: {binary}",
        "#",
    ]
    return CommandOutput(0, "\n".join(lines) + "\n\n", "", seconds=elapsed_us / 1e6)


def nccl_test_binary(context: Context, argv: list[str]) -> CommandOutput:
    binary = argv[0].rsplit("/", 1)[-1]
    try:
        args = parse_args(argv[1:])
    except UsageError as error:
        return CommandOutput(1, "", f"{binary}: {error}\n")
    return paced(context, run_nccl_tests([context.state], binary, args, seed=context.seed, env=context.env))


def paced(context: Context, report: CommandOutput) -> CommandOutput:
    """The run takes the model's time (the transport then prints its rows over it) only when the simulator runs in
    real time (RACKPILOT_SIM_REAL_TIME: demos, the live plot's browser test); else it answers at once."""
    return report if context.real_time else replace(report, seconds=0.0)


COMMANDS = {binary: nccl_test_binary for binary in BINARIES}
