"""Host facts: lscpu (text and -J), numactl -H, /proc/meminfo and other files, uname, hostname, free, dmesg; the
clock (chronyc), the BMC (ipmitool mc info), and the write-file script deployments use."""

import base64
import binascii
import time

from apps.nodeexec.catalogue import (
    DCGM_SOAK_SCRIPT,
    HPL_DAT_LINES,
    HPL_SCRIPT,
    MPIRUN_HOSTFILE_SCRIPT,
    NIC_FACTS_SCRIPT,
    SOAK_SCRIPT,
    TRACE_HEADER,
    TRACE_READ_SCRIPT,
    UTILISATION_SCRIPT,
    WRITE_FILE_SCRIPT,
)
from apps.simulator import clock
from apps.simulator.boot import BOOT_ID_PATH, boot_id, up_since, uptime_text
from apps.simulator.digits import decimal_number, is_whole_number
from apps.simulator.model import noise
from apps.simulator.state import KERNEL_RELEASE, SimulatedNode
from apps.simulator.terminal import CommandOutput, Context, fail, not_found, ok
from apps.simulator.tools import bench, loader, mpi, utilisation
from apps.simulator.tools.common import cpu_ranges, util_linux_json
from apps.simulator.tools.network import nic_facts
from apps.simulator.tools.storage import read_storage_file
from apps.simulator.training_faults import training_file

PATH_MAX_LENGTH = 250  # what a change key holds after "file:"

# --- lscpu ------------------------------------------------------------------------------------------------------

CPU_FLAGS = (
    "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush dts acpi mmx fxsr sse sse2 ss ht "
    "tm pbe syscall nx pdpe1gb rdtscp lm constant_tsc art arch_perfmon pebs bts rep_good nopl xtopology nonstop_tsc "
    "cpuid aperfmperf tsc_known_freq pni pclmulqdq dtes64 monitor ds_cpl vmx smx est tm2 ssse3 sdbg fma cx16 xtpr "
    "pdcm pcid dca sse4_1 sse4_2 x2apic movbe popcnt tsc_deadline_timer aes xsave avx f16c rdrand lahf_lm abm "
    "3dnowprefetch cpuid_fault epb cat_l3 cat_l2 cdp_l3 invpcid_single intel_ppin cdp_l2 ssbd mba ibrs ibpb stibp "
    "ibrs_enhanced tpr_shadow flexpriority ept vpid ept_ad fsgsbase tsc_adjust bmi1 avx2 smep bmi2 erms invpcid cqm "
    "rdt_a avx512f avx512dq rdseed adx smap avx512ifma clflushopt clwb intel_pt avx512cd sha_ni avx512bw avx512vl "
    "xsaveopt xsavec xgetbv1 xsaves cqm_llc cqm_occup_llc cqm_mbm_total cqm_mbm_local split_lock_detect avx_vnni "
    "avx512_bf16 wbnoinvd dtherm ida arat pln pts hfi vnmi avx512vbmi umip pku ospke waitpkg avx512_vbmi2 gfni vaes "
    "vpclmulqdq avx512_vnni avx512_bitalg tme avx512_vpopcntdq la57 rdpid bus_lock_detect cldemote movdiri movdir64b "
    "enqcmd fsrm md_clear serialize tsxldtrk pconfig arch_lbr ibt amx_bf16 avx512_fp16 amx_tile amx_int8 flush_l1d "
    "arch_capabilities"
)


def lscpu_fields(state: SimulatedNode) -> list[tuple[str, str]]:
    cores_per_socket = max(state.cores // state.sockets, 1)
    amd = "AMD" in state.cpu_model
    fields = [
        ("Architecture:", "x86_64"),
        ("CPU op-mode(s):", "32-bit, 64-bit"),
        ("Address sizes:", "52 bits physical, 57 bits virtual"),
        ("Byte Order:", "Little Endian"),
        ("CPU(s):", str(state.cpu_count)),
        ("On-line CPU(s) list:", f"0-{state.cpu_count - 1}"),
        ("Vendor ID:", "AuthenticAMD" if amd else "GenuineIntel"),
        ("Model name:", state.cpu_model),
        ("CPU family:", "25" if amd else "6"),
        ("Model:", "17" if amd else "143"),
        ("Thread(s) per core:", str(state.threads_per_core)),
        ("Core(s) per socket:", str(cores_per_socket)),
        ("Socket(s):", str(state.sockets)),
        ("Stepping:", "8"),
        ("CPU(s) scaling MHz:", "100%"),
        ("CPU max MHz:", "3800.0000"),
        ("CPU min MHz:", "800.0000"),
        ("BogoMIPS:", "4000.00"),
        ("Flags:", CPU_FLAGS),
        ("Virtualization:", "AMD-V" if amd else "VT-x"),
        ("L1d cache:", f"{48 * state.cores // 1024} MiB ({state.cores} instances)"),
        ("L1i cache:", f"{32 * state.cores // 1024} MiB ({state.cores} instances)"),
        ("L2 cache:", f"{2 * state.cores} MiB ({state.cores} instances)"),
        ("L3 cache:", f"{105 * state.sockets} MiB ({state.sockets} instances)"),
        ("NUMA node(s):", str(state.numa_nodes)),
    ]
    fields += [(f"NUMA node{numa} CPU(s):", cpu_ranges(state.numa_cpus(numa))) for numa in range(state.numa_nodes)]
    fields += [
        ("Vulnerability Gather data sampling:", "Not affected"),
        ("Vulnerability Itlb multihit:", "Not affected"),
        ("Vulnerability L1tf:", "Not affected"),
        ("Vulnerability Mds:", "Not affected"),
        ("Vulnerability Meltdown:", "Not affected"),
        ("Vulnerability Mmio stale data:", "Not affected"),
        ("Vulnerability Retbleed:", "Not affected"),
        ("Vulnerability Spec rstack overflow:", "Not affected"),
        ("Vulnerability Spec store bypass:", "Mitigation; Speculative Store Bypass disabled via prctl"),
        ("Vulnerability Spectre v1:", "Mitigation; usercopy/swapgs barriers and __user pointer sanitization"),
        ("Vulnerability Spectre v2:", "Mitigation; Enhanced / Automatic IBRS; IBPB conditional; RSB filling"),
        ("Vulnerability Srbds:", "Not affected"),
        ("Vulnerability Tsx async abort:", "Not affected"),
    ]
    return fields


def lscpu(context: Context, argv: list[str]) -> CommandOutput:
    fields = lscpu_fields(context.state)
    if "-J" in argv or "--json" in argv:
        document = {"lscpu": [{"field": name, "data": value} for name, value in fields]}
        return ok(util_linux_json(document) + "\n")
    return ok("".join(f"{name:<41}{value}\n" for name, value in fields))


# --- numactl -H -------------------------------------------------------------------------------------------------


def numactl(context: Context, argv: list[str]) -> CommandOutput:
    if not ({"-H", "--hardware"} & set(argv)):
        return fail(1, "usage: numactl [--all | -a] [--interleave= | -i <nodes>] ... command args ...\n")
    state = context.state
    count = state.numa_nodes
    node_mb = state.memory_gib * 1024 // count
    lines = [f"available: {count} nodes ({'0' if count == 1 else f'0-{count - 1}'})"]
    for numa in range(count):
        rng = noise(context.seed, state.hostname, "numa", numa)
        lines += [
            f"node {numa} cpus: {' '.join(str(cpu) for cpu in state.numa_cpus(numa))}",
            f"node {numa} size: {node_mb - 300} MB",
            f"node {numa} free: {int(node_mb * rng.uniform(0.90, 0.95))} MB",
        ]
    lines.append("node distances:")
    lines.append("node " + "".join(f"{numa:>4}" for numa in range(count)) + " ")
    for row in range(count):
        lines.append(f"{row:>3}: " + "".join(f"{10 if row == col else 21:>4}" for col in range(count)) + " ")
    return ok("\n".join(lines) + "\n")


# --- files ------------------------------------------------------------------------------------------------------


def meminfo(state: SimulatedNode, seed: int) -> str:
    rng = noise(seed, state.hostname, "meminfo")
    total = state.memory_gib * 1024 * 1024 - 9_437_184  # firmware and kernel reservations
    free = int(total * rng.uniform(0.92, 0.95))
    cached = int(total * 0.02)
    values = [
        ("MemTotal", total),
        ("MemFree", free),
        ("MemAvailable", free + cached),
        ("Buffers", 412_332),
        ("Cached", cached),
        ("SwapCached", 0),
        ("Active", cached // 3),
        ("Inactive", cached // 2),
        ("SwapTotal", 0),
        ("SwapFree", 0),
        ("Dirty", 1_204),
        ("Writeback", 0),
        ("AnonPages", 3_145_728),
        ("Mapped", 524_288),
        ("Shmem", 65_536),
        ("Slab", 4_194_304),
        ("KernelStack", 65_536),
        ("PageTables", 98_304),
        ("CommitLimit", total // 2),
        ("Committed_AS", 9_437_184),
        ("VmallocTotal", 13_743_895_347_199),
        ("VmallocUsed", 1_048_576),
        ("HugePages_Total", 0),
        ("HugePages_Free", 0),
        ("HugePages_Rsvd", 0),
        ("HugePages_Surp", 0),
        ("Hugepagesize", 2_048),
        ("Hugetlb", 0),
        ("DirectMap4k", 2_097_152),
        ("DirectMap2M", 67_108_864),
        ("DirectMap1G", total),
    ]
    lines = []
    for name, value in values:
        unit = "" if name.startswith("HugePages_") else " kB"
        lines.append(f"{name + ':':<16}{value:>8}{unit}")
    return "\n".join(lines) + "\n"


OS_RELEASE = """\
PRETTY_NAME="Ubuntu 22.04.5 LTS"
NAME="Ubuntu"
VERSION_ID="22.04"
VERSION="22.04.5 LTS (Jammy Jellyfish)"
VERSION_CODENAME=jammy
ID=ubuntu
ID_LIKE=debian
HOME_URL="https://www.ubuntu.com/"
SUPPORT_URL="https://help.ubuntu.com/"
BUG_REPORT_URL="https://bugs.launchpad.net/ubuntu/"
PRIVACY_POLICY_URL="https://www.ubuntu.com/legal/terms-and-policies/privacy-policy"
UBUNTU_CODENAME=jammy
"""


def read_file(context: Context, path: str, last_lines: int | None = None) -> str | None:
    """The file's content (None: no such file); `last_lines`: a reader that wants only the end (tail) may get only
    that much of a long generated file (a training log)."""
    state = context.state
    if path in state.files:
        return state.files[path]
    if path == loader.PSI_PATH:
        return loader.pressure(context)
    if path == "/proc/meminfo":
        return meminfo(state, context.seed)
    if path == "/etc/os-release":
        return OS_RELEASE
    if path == "/etc/hostname":
        return state.hostname + "\n"
    if path == BOOT_ID_PATH:
        count = int((state.boot or {}).get("count", 0))
        return boot_id(hostname=state.hostname, count=count, seed=context.seed) + "\n"
    if path == "/sys/class/dmi/id/bios_version":
        return state.bios + "\n"
    if path == "/proc/driver/nvidia/version":
        return (
            f"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {state.driver_version}  Release Build  "
            "(dvs-builder@U22-I3-AF03-09-1)  Tue Oct 14 19:33:52 UTC 2026\nGCC version:  gcc version 12.3.0 (Ubuntu "
            "12.3.0-1ubuntu1~22.04)\n"
        )
    parts = path.split("/")
    if path.startswith("/sys/class/net/") and len(parts) >= 6 and (nic := state.nic(parts[4])):
        attribute = "/".join(parts[5:])
        if attribute == "mtu":
            return f"{nic.mtu}\n"
        if attribute == "speed":
            return f"{nic.effective_speed_gbps * 1000 if nic.link_up else -1}\n"
        if attribute in ("operstate", "carrier"):
            return ("up\n" if nic.link_up else "down\n") if attribute == "operstate" else f"{int(nic.link_up)}\n"
        if attribute.startswith("ecn/roce_") and parts[-2] == "enable" and is_whole_number(parts[-1]):
            return f"{int(nic.ecn)}\n"
    # a simulated training run's log (apps/simulator/training.py)
    log = training_file(context.hostname, path, last=last_lines)
    return log if log is not None else read_storage_file(context, path)


def cat(context: Context, argv: list[str]) -> CommandOutput:
    out, errors, code = [], [], 0
    for path in argv[1:]:
        content = read_file(context, path)
        if content is None:
            errors.append(f"cat: {path}: No such file or directory\n")
            code = 1
        else:
            out.append(content)
    return CommandOutput(code, "".join(out), "".join(errors))


# --- small commands ---------------------------------------------------------------------------------------------


def uname(context: Context, argv: list[str]) -> CommandOutput:
    host = context.hostname
    build = "#63~22.04.1-Ubuntu SMP PREEMPT_DYNAMIC Tue Apr 15 19:04:15 UTC 2"
    full = f"Linux {host} {KERNEL_RELEASE} {build} x86_64 x86_64 x86_64 GNU/Linux"
    answers = {"-a": full, "-r": KERNEL_RELEASE, "-n": host, "-m": "x86_64", "-s": "Linux"}
    option = argv[1] if len(argv) > 1 else "-s"
    return ok(answers.get(option, "Linux") + "\n")


def hostname(context: Context, argv: list[str]) -> CommandOutput:
    return ok(context.hostname + "\n")


def free(context: Context, argv: list[str]) -> CommandOutput:
    info = meminfo(context.state, context.seed)
    values = {line.split(":")[0]: int(line.split()[1]) for line in info.splitlines()}
    scale = 1024 if "-b" in argv else 1
    total, free_kib, available = values["MemTotal"], values["MemFree"], values["MemAvailable"]
    cache = values["Cached"] + values["Buffers"]
    used = total - free_kib - cache
    return ok(
        "               total        used        free      shared  buff/cache   available\n"
        "Mem:   "
        + "".join(f" {value * scale:>11}" for value in (total, used, free_kib, values["Shmem"], cache, available))
        + "\nSwap:  "
        + "".join(f" {0:>11}" for _ in range(3))
        + "\n"
    )


def uptime(context: Context, argv: list[str]) -> CommandOutput:
    """Since the node's last simulated reboot, else the 12 days it has been up since before the simulator knew it."""
    booted, at = up_since(context.state.boot), clock.now()  # the boot's clock: the simulated cluster's
    up = uptime_text(at - booted) if booted is not None else "12 days,  3:14"
    now = time.strftime("%H:%M:%S", time.gmtime(at))
    return ok(f" {now} up {up},  0 users,  load average: 0.08, 0.12, 0.10\n")


def true(context: Context, argv: list[str]) -> CommandOutput:
    return ok("")


def sleep(context: Context, argv: list[str]) -> CommandOutput:
    try:
        seconds = decimal_number(argv[1])
    except (IndexError, ValueError):
        return fail(1, "sleep: missing operand\nTry 'sleep --help' for more information.\n")
    return CommandOutput(0, "", seconds=max(seconds, 0.0))  # the transport does the waiting


def dmidecode(context: Context, argv: list[str]) -> CommandOutput:
    keyword = argv[argv.index("-s") + 1] if "-s" in argv and argv.index("-s") + 1 < len(argv) else None
    answers = {"bios-version": context.state.bios, "system-product-name": "HGX H200 8-GPU", "bios-vendor": "AMI"}
    if keyword not in answers:
        return fail(1, "dmidecode: only -s bios-version, bios-vendor and system-product-name are simulated\n")
    return ok(answers[keyword] + "\n")


def ipmitool(context: Context, argv: list[str]) -> CommandOutput:
    if argv[1:3] == ["mc", "info"]:
        return ok(
            "Device ID                 : 32\n"
            "Device Revision           : 1\n"
            f"Firmware Revision         : {context.state.bmc}\n"
            "IPMI Version              : 2.0\n"
            "Manufacturer ID           : 10876\n"
            "Manufacturer Name         : Supermicro\n"
            "Product ID                : 6929 (0x1b11)\n"
            "Product Name              : Unknown (0x1B11)\n"
            "Device Available          : yes\n"
            "Provides Device SDRs      : no\n"
            "Additional Device Support :\n"
            "    Sensor Device\n"
            "    SDR Repository Device\n"
            "    SEL Device\n"
            "    FRU Inventory Device\n"
            "    IPMB Event Receiver\n"
            "    IPMB Event Generator\n"
            "    Chassis Device\n"
            "Aux Firmware Rev Info     : \n"
            "    0x00\n"
            "    0x00\n"
            "    0x00\n"
            "    0x00\n"
        )
    return not_found("ipmitool") if len(argv) < 2 else fail(1, "ipmitool: only 'mc info' is simulated\n")


# --- chronyc tracking -------------------------------------------------------------------------------------------


def chronyc(context: Context, argv: list[str]) -> CommandOutput:
    if argv[1:] != ["tracking"]:
        return fail(1, "chronyc: only 'chronyc tracking' is simulated\n")
    state = context.state
    rng = noise(context.seed, state.hostname, "chrony")
    if state.ptp_synchronised:
        offset = rng.uniform(-4e-7, 4e-7)
        fields = [
            ("Reference ID", "50484330 (PHC0)"),
            ("Stratum", "1"),
            ("Ref time (UTC)", "Mon Nov 30 08:59:59 2026"),
            ("System time", f"{abs(offset):.9f} seconds {'fast' if offset > 0 else 'slow'} of NTP time"),
            ("Last offset", f"{rng.uniform(-3e-7, 3e-7):+.9f} seconds"),
            ("RMS offset", f"{rng.uniform(5e-8, 4e-7):.9f} seconds"),
            ("Frequency", f"{rng.uniform(2, 20):.3f} ppm fast"),
            ("Residual freq", f"{rng.uniform(-0.004, 0.004):+.3f} ppm"),
            ("Skew", f"{rng.uniform(0.001, 0.02):.3f} ppm"),
            ("Root delay", "0.000000001 seconds"),
            ("Root dispersion", f"{rng.uniform(1e-6, 3e-6):.9f} seconds"),
            ("Update interval", "1.0 seconds"),
            ("Leap status", "Normal"),
        ]
    else:
        offset = rng.uniform(0.4, 2.5)
        fields = [
            ("Reference ID", "00000000 ()"),
            ("Stratum", "0"),
            ("Ref time (UTC)", "Thu Jan 01 00:00:00 1970"),
            ("System time", f"{offset:.9f} seconds fast of NTP time"),
            ("Last offset", f"{offset * rng.uniform(0.5, 0.9):+.9f} seconds"),
            ("RMS offset", f"{offset * rng.uniform(0.3, 0.6):.9f} seconds"),
            ("Frequency", f"{rng.uniform(20, 80):.3f} ppm slow"),
            ("Residual freq", "+0.000 ppm"),
            ("Skew", "0.000 ppm"),
            ("Root delay", "1.000000000 seconds"),
            ("Root dispersion", "1.000000000 seconds"),
            ("Update interval", "0.0 seconds"),
            ("Leap status", "Not synchronised"),
        ]
    return ok("".join(f"{name:<16}: {value}\n" for name, value in fields))


# --- sh -c WRITE_FILE_SCRIPT / NIC_FACTS_SCRIPT, systemctl -----------------------------------------------------------


def _sysfs_ecn(context: Context, path: str) -> tuple[str, str] | None:
    """(NIC, path) when path is /sys/class/net/IF/ecn/roce_np|roce_rp/enable/P."""
    parts = path.split("/")
    if (
        len(parts) == 9
        and parts[1:4] == ["sys", "class", "net"]
        and parts[5:6] == ["ecn"]
        and parts[6] in ("roce_np", "roce_rp")
        and parts[7] == "enable"
        and is_whole_number(parts[8])
    ):
        return parts[4], path
    return None


def write_file(context: Context, content_b64: str, path: str) -> CommandOutput:
    try:
        content = base64.b64decode(content_b64, validate=True).decode("utf-8", errors="replace")
    except (binascii.Error, ValueError):
        return fail(1, "base64: invalid input\n")
    if not path.startswith("/"):
        return fail(2, f"sh: 1: cannot create {path}: Permission denied\n")
    if len(path) > PATH_MAX_LENGTH:
        return fail(2, f"sh: 1: cannot create {path}: File name too long\n")
    if ecn := _sysfs_ecn(context, path):
        nic = context.state.nic(ecn[0])
        if nic is None:
            return fail(2, f"sh: 1: cannot create {path}: Directory nonexistent\n")
        if content.strip() not in ("0", "1"):
            return fail(1, "base64: write error: Invalid argument\n")
        context.change(f"nic:{nic.name}:ecn", content.strip() == "1")
        return ok("")
    if path.startswith(("/sys/", "/proc/", "/dev/")):
        return fail(2, f"sh: 1: cannot create {path}: Permission denied\n")
    context.change(f"file:{path}", content)
    return ok("")


def sh(context: Context, argv: list[str]) -> CommandOutput:
    if len(argv) == 6 and argv[1] == "-c" and argv[2] == WRITE_FILE_SCRIPT:
        return write_file(context, argv[4], argv[5])
    if len(argv) == 5 and argv[1] == "-c" and argv[2] == NIC_FACTS_SCRIPT:
        return nic_facts(context, argv[4])
    if len(argv) == 6 and argv[1] == "-c" and argv[2] == SOAK_SCRIPT:
        return bench.soak(context, argv[4], argv[5])
    if len(argv) == 6 and argv[1] == "-c" and argv[2] == DCGM_SOAK_SCRIPT:
        return bench.dcgm_soak(context, argv[4], argv[5])
    if len(argv) == 6 and argv[1] == "-c" and argv[2] == UTILISATION_SCRIPT:
        return utilisation.samples(context, argv[4], argv[5])
    if len(argv) == 10 and argv[1] == "-c" and argv[2] == HPL_SCRIPT:
        return classic_hpl(context, argv[4:])
    if len(argv) == 6 and argv[1] == "-c" and argv[2] == TRACE_READ_SCRIPT:
        return trace_read(context, argv[4], argv[5])
    if len(argv) >= 5 and argv[1] == "-c" and argv[2] == MPIRUN_HOSTFILE_SCRIPT:
        return mpirun_from_hostfile(context, argv[4], argv[5:])
    return fail(2, "sh: simulated nodes run only catalogue scripts\n")


def classic_hpl(context: Context, args: list[str]) -> CommandOutput:
    """sh -c HPL_SCRIPT: HPL.dat written from the arguments to a temporary directory, then mpirun ... hpl.sh --dat."""
    n, nb, p, q, processes, hosts = args
    path = "/tmp/tmp.rackpilot-hpl/HPL.dat"
    values = {"$1": n, "$2": nb, "$3": p, "$4": q}
    context.state.files[path] = "\n".join(
        values.get(line.split()[0], line.split()[0]) + line[len(line.split()[0]) :] for line in HPL_DAT_LINES
    )
    try:
        argv = ["mpirun", "--allow-run-as-root", "-np", processes, "-H", hosts, "--bind-to", "none"]
        return mpi.mpirun(context, [*argv, "--map-by", "slot", "hpl.sh", "--dat", path])
    finally:
        del context.state.files[path]  # the script removes its directory


def trace_read(context: Context, path: str, max_bytes: str) -> CommandOutput:
    """sh -c TRACE_READ_SCRIPT: a file of the node's as the size line and base64 (76 a line, as coreutils wraps)."""
    content = context.state.files.get(path)
    if content is None:
        return fail(1, f"{path}: no such file\n")
    data = content.encode() if isinstance(content, str) else bytes(content)
    if len(data) > int(max_bytes):
        return fail(1, f"{path}: {len(data)} bytes, over {max_bytes}\n")
    return ok(f"{TRACE_HEADER} {len(data)}\n" + base64.encodebytes(data).decode())


def mpirun_from_hostfile(context: Context, hosts: str, args: list[str]) -> CommandOutput:
    """sh -c MPIRUN_HOSTFILE_SCRIPT: the hosts written as a hostfile in a temporary file, then mpirun --hostfile."""
    path = "/tmp/tmp.rackpilot-mpirun"
    entries = [entry.rpartition(":") for entry in hosts.split(",")]
    context.state.files[path] = "".join(f"{name} slots={slots}\n" for name, _, slots in entries)
    try:
        return mpi.mpirun(context, ["mpirun", "--hostfile", path, *args])
    finally:
        del context.state.files[path]  # the script's trap removes it


def systemctl(context: Context, argv: list[str]) -> CommandOutput:
    args = [arg for arg in argv[1:] if arg not in ("--no-pager", "--quiet", "-q")]
    if args == ["daemon-reload"]:
        return ok("")
    if args == ["reboot"]:  # quiet and at once, as systemd queues the reboot; the session stores it (NodeSession)
        context.reboot_requested = True
        return ok("")
    if len(args) == 4 and args[:3] == ["show", "-p", "ActiveState"]:
        return ok("ActiveState=active\n")
    if len(args) == 2 and args[0] == "show" and args[1].startswith("--property=ActiveState"):
        return ok("ActiveState=active\n")
    return fail(1, "systemctl: only daemon-reload, reboot and show -p ActiveState are simulated\n")


# --- dmesg ------------------------------------------------------------------------------------------------------


def dmesg(context: Context, argv: list[str]) -> CommandOutput:
    from apps.simulator.tools.kernel_log import dmesg as kernel_dmesg

    return kernel_dmesg(context, argv)


# --- nvidia-bug-report.sh ------------------------------------------------------------------------------------------


def nvidia_bug_report(context: Context, argv: list[str]) -> CommandOutput:
    """The real script's words on stdout (the log itself is gzipped into the file, which stays on the node)."""
    name = "nvidia-bug-report.log"
    if "--output-file" in argv[:-1]:
        name = argv[argv.index("--output-file") + 1]
    name = f"{name}.gz" if not name.endswith(".gz") else name
    return ok(
        "\nnvidia-bug-report.sh will now collect information about your\n"
        f"system and create the file '{name}' in the current\n"
        "directory.  It may take several seconds to run.  In some\n"
        "cases, it may hang trying to capture data generated dynamically\n"
        "by the Linux kernel and/or the NVIDIA kernel module.  While\n"
        "the bug report log file will be incomplete if this happens, it\n"
        "may still contain enough data to diagnose your problem.\n\n"
        f"Please include the '{name}' log file when reporting\n"
        "your bug via the NVIDIA Linux forum (see forums.developer.nvidia.com)\n"
        "or by sending email to 'linux-bugs@nvidia.com'.\n\n"
        "Running nvidia-bug-report.sh... complete.\n"
    )


COMMANDS = {
    "nvidia-bug-report.sh": nvidia_bug_report,
    "lscpu": lscpu,
    "numactl": numactl,
    "cat": cat,
    "uname": uname,
    "hostname": hostname,
    "free": free,
    "uptime": uptime,
    "true": true,
    "sleep": sleep,
    "dmidecode": dmidecode,
    "ipmitool": ipmitool,
    "dmesg": dmesg,
    "chronyc": chronyc,
    "sh": sh,
    "systemctl": systemctl,
}
