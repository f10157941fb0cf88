"""Installed software and firmware: apt-get install, dpkg-query, fwupdmgr install, nvcc, mpirun, python3 and pip.

Each install records a change (software:<name> or firmware:<component>) that persists on the node; an install that
names anything unknown changes nothing, as apt-get and pip refuse the whole transaction.
"""

import re

from apps.nodeexec.catalogue import CHECKPOINT_LOAD_SCRIPT, PYTHON_VERSIONS_SCRIPT
from apps.simulator.changes import FIRMWARE_COMPONENTS
from apps.simulator.state import SimulatedNode
from apps.simulator.terminal import CommandOutput, Context, fail, ok
from apps.simulator.tools.storage import load_check

FIRMWARE_DIR = "/var/lib/rackpilot/firmware"
PYTHON_VERSION = "3.10.12"  # Ubuntu 22.04's python3
DEFAULT_PYTHON_PACKAGES = {"torch": "2.7.1", "tensorflow": "2.19.0"}
WHEEL_SIZES_MB = {"torch": 821.2, "tensorflow": 644.9}

# --- apt-get install, dpkg-query ---------------------------------------------------------------------------------

DEB_VERSION = re.compile(r"^(?P<version>[0-9][0-9A-Za-z.~]*)-(?P<revision>[0-9][0-9A-Za-z.+~]*)$")
CUDA_TOOLKIT = re.compile(r"^cuda-toolkit-(?P<major>[0-9]+)-(?P<minor>[0-9]+)$")


def _package_versions(state: SimulatedNode) -> dict[str, str]:
    """The Debian versions dpkg-query reports for the packages deployments manage."""
    nccl = f"{state.nccl_version}-1+cuda{state.cuda_toolkit}"
    major, _, minor = state.cuda_toolkit.partition(".")
    return {
        "cuda-drivers": f"{state.driver_version}-1",
        f"cuda-toolkit-{major}-{minor or 0}": f"{state.cuda_toolkit}.0-1",
        "libnccl2": nccl,
        "libnccl-dev": nccl,
        "openmpi-bin": f"{state.openmpi_version}-1",
    }


def _resolve(spec: str) -> tuple[str, str, str, str] | None:
    """'libnccl2=2.26.2-1+cuda12.8' -> (package, Debian version, change key, value); None when apt knows no such."""
    if match := CUDA_TOOLKIT.match(spec):
        version = f"{int(match['major'])}.{int(match['minor'])}"
        return spec, f"{version}.0-1", "software:cuda", version
    package, _, wanted = spec.partition("=")
    keys = {"cuda-drivers": "driver", "libnccl2": "nccl", "libnccl-dev": "nccl", "openmpi-bin": "openmpi"}
    if package not in keys or not wanted:
        return None
    version = DEB_VERSION.match(wanted)
    if version is None:
        return package, wanted, "", ""
    return package, wanted, f"software:{keys[package]}", version["version"]


def apt_get(context: Context, argv: list[str]) -> CommandOutput:
    args = [arg for arg in argv[1:] if not arg.startswith("-")]
    if args[:1] != ["install"]:
        return fail(100, "E: the simulator runs only apt-get install\n")
    specs = args[1:]
    resolved = []
    for spec in specs:
        found = _resolve(spec)
        if found is None:
            return fail(100, f"E: Unable to locate package {spec.partition('=')[0]}\n", _APT_HEADER)
        package, version, key, _ = found
        if not key:
            return fail(100, f"E: Version '{version}' for '{package}' was not found\n", _APT_HEADER)
        resolved.append(found)
    if not resolved:
        return ok(_APT_HEADER + "0 upgraded, 0 newly installed, 0 to remove and 0 not upgraded.\n")
    names = " ".join(package for package, *_ in resolved)
    lines = [_APT_HEADER.rstrip("\n"), "The following packages will be upgraded:", f"  {names}"]
    lines.append(f"{len(resolved)} upgraded, 0 newly installed, 0 to remove and 0 not upgraded.")
    lines += [f"Preparing to unpack .../{package}_{version}_amd64.deb ..." for package, version, *_ in resolved]
    lines += [f"Unpacking {package} ({version}) ..." for package, version, *_ in resolved]
    lines += [f"Setting up {package} ({version}) ..." for package, version, *_ in resolved]
    lines.append("Processing triggers for libc-bin (2.35-0ubuntu3.8) ...")
    for _, _, key, value in resolved:
        context.change(key, value)
    return ok("\n".join(lines) + "\n")


_APT_HEADER = "Reading package lists...\nBuilding dependency tree...\nReading state information...\n"


def dpkg_query(context: Context, argv: list[str]) -> CommandOutput:
    args = argv[1:]
    if len(args) != 3 or args[0] != "-W" or args[1] != "-f=${Version}":
        return fail(2, "dpkg-query: the simulator answers only -W -f=${Version} PACKAGE\n")
    package = args[2]
    version = _package_versions(context.state).get(package)
    if version is None:
        return fail(1, f"dpkg-query: no packages found matching {package}\n")
    return ok(version)


# --- fwupdmgr install ------------------------------------------------------------------------------------------

FWUPD_STEPS = ("Decompressing…", "Authenticating…", "Restarting device…", "Writing…", "Verifying…")


def fwupdmgr(context: Context, argv: list[str]) -> CommandOutput:
    args = [arg for arg in argv[1:] if not arg.startswith("-")]
    if args[:1] != ["install"] or len(args) != 2:
        return fail(1, "the simulator runs only fwupdmgr install FILE.cab\n")
    path = args[1]
    directory, _, filename = path.rpartition("/")
    parent, _, component = directory.rpartition("/")
    if not filename.endswith(".cab") or parent != FIRMWARE_DIR:
        return fail(1, f"Failed to load {path}: No such file or directory\n")
    if component not in FIRMWARE_COMPONENTS or not filename[: -len(".cab")]:
        return fail(1, "No supported devices found\n")
    version = filename[: -len(".cab")]
    bar = "[" + "*" * 39 + "]"
    lines = [f"{step:<25}{bar}" for step in FWUPD_STEPS]
    lines.append("Successfully installed firmware")
    context.change(f"firmware:{component}", version)
    return ok("\n".join(lines) + "\n")


# --- nvcc, mpirun -----------------------------------------------------------------------------------------------

# nvcc --version per toolkit release: (patch, build date, compiler build)
NVCC_BUILDS = {
    "12.4": ("131", "Thu_Mar_28_02:18:24_PDT_2024", "34097967_0"),
    "12.6": ("85", "Thu_Sep_12_02:18:05_PDT_2024", "34841621_0"),
    "12.8": ("93", "Fri_Feb_21_20:23:50_PST_2025", "35583870_0"),
    "12.9": ("86", "Tue_May_27_02:21:03_PDT_2025", "36037853_0"),
    "13.0": ("88", "Wed_Aug_20_01:58:59_PM_PDT_2025", "36424714_0"),
}


def nvcc(context: Context, argv: list[str]) -> CommandOutput:
    if not ({"--version", "-V"} & set(argv[1:])):
        return fail(1, "nvcc fatal   : No input files specified; use option --help for more information\n")
    release = context.state.cuda_toolkit
    patch, built, build = NVCC_BUILDS.get(release, ("0", "Mon_Jan_01_00:00:00_PST_2025", "00000000_0"))
    return ok(
        "nvcc: NVIDIA (R) Cuda compiler driver\n"
        "Copyright (c) 2005-2025 NVIDIA Corporation\n"
        f"Built on {built}\n"
        f"Cuda compilation tools, release {release}, V{release}.{patch}\n"
        f"Build cuda_{release}.r{release}/compiler.{build}\n"
    )


def mpirun(context: Context, argv: list[str]) -> CommandOutput:
    if argv[1:] == ["--version"] or argv[1:] == ["-V"]:
        return ok(
            f"mpirun (Open MPI) {context.state.openmpi_version}\n\n"
            "Report bugs to https://www.open-mpi.org/community/help/\n"
        )
    return fail(1, "mpirun: the simulator answers only mpirun --version\n")


# --- python3 -c, python3 -m pip install -----------------------------------------------------------------------------

PIP_REQUIREMENT = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)(?:==(?P<version>[0-9][0-9A-Za-z.+]*))?$")


def _pip_install(context: Context, requirements: list[str]) -> CommandOutput:
    wanted = []
    for requirement in requirements:
        match = PIP_REQUIREMENT.match(requirement)
        name = match["name"].lower() if match else requirement
        if not match or name not in DEFAULT_PYTHON_PACKAGES:
            return fail(
                1,
                f"ERROR: Could not find a version that satisfies the requirement {requirement} (from versions: none)\n"
                f"ERROR: No matching distribution found for {requirement}\n",
            )
        wanted.append((name, match["version"] or DEFAULT_PYTHON_PACKAGES[name]))
    if not wanted:
        return fail(1, 'ERROR: You must give at least one requirement to install (see "pip help install")\n')
    lines = []
    for name, version in wanted:
        lines += [
            f"Collecting {name}=={version}",
            f"  Downloading {name}-{version}-cp310-cp310-manylinux_2_28_x86_64.whl ({WHEEL_SIZES_MB[name]} MB)",
        ]
    lines.append(f"Installing collected packages: {', '.join(name for name, _ in wanted)}")
    lines.append("Successfully installed " + " ".join(f"{name}-{version}" for name, version in wanted))
    for name, version in wanted:
        context.change(f"software:{name}", version)
    return ok("\n".join(lines) + "\n")


def python3(context: Context, argv: list[str]) -> CommandOutput:
    args = argv[1:]
    if args in (["--version"], ["-V"]):
        return ok(f"Python {PYTHON_VERSION}\n")
    if args[:3] == ["-m", "pip", "install"]:
        return _pip_install(context, [arg for arg in args[3:] if not arg.startswith("-")])
    if len(args) == 3 and args[:2] == ["-c", CHECKPOINT_LOAD_SCRIPT]:
        return load_check(context, args[2])
    if args == ["-c", PYTHON_VERSIONS_SCRIPT]:
        installed = context.state.python_packages
        return ok("".join(f"{name} {installed.get(name, 'missing')}\n" for name in ("torch", "tensorflow")))
    return fail(
        1,
        'Traceback (most recent call last):\n  File "<string>", line 1, in <module>\n'
        "RuntimeError: simulated nodes run only catalogue scripts\n",
    )


COMMANDS = {
    "apt-get": apt_get,
    "dpkg-query": dpkg_query,
    "fwupdmgr": fwupdmgr,
    "nvcc": nvcc,
    "python3": python3,
    "python": python3,
}
