"""The commands deployment steps run, as catalogue entries (argv templates with checked placeholders).

Nothing typed into the wizard reaches a shell: each value fills its argv element after its placeholder's pattern
accepts it, and the ssh transport quotes every element. Files are written by one fixed script that takes
the content (base64) and the path as positional arguments, so no content is ever parsed by the shell.
"""

from apps.nodeexec.catalogue import (
    CATALOGUE,
    PYTHON_VERSIONS_SCRIPT,
    WRITE_FILE_SCRIPT,
    Command,
    Placeholder,
    register_command,
    register_placeholder,
)

# The deployment steps' own placeholders (the generic ones, paths and interfaces, are nodeexec's).
register_placeholder("pfc_mask", Placeholder(r"[01](,[01]){7}", "eight 0/1 flags separated by commas"))
register_placeholder(
    "package", Placeholder(r"[a-z0-9][a-z0-9.+-]{0,63}(=[A-Za-z0-9.+:~-]{1,64})?", "an apt package[=version]")
)
register_placeholder(
    "requirement", Placeholder(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}==[A-Za-z0-9.+-]{1,32}", "a pip name==version")
)

COMMANDS = (
    Command("read-file", ("cat", "{path}"), "Prints one file (configuration, sysfs).", placeholders=("path",)),
    Command(
        "write-file",
        ("sh", "-c", WRITE_FILE_SCRIPT, "sh", "{base64}", "{path}"),
        "Writes a file from base64 content (the content is an argument, never shell text).",
        placeholders=("base64", "path"),
        root=True,
    ),
    Command("nvidia-smi-q-xml", ("nvidia-smi", "-q", "-x"), "Every GPU's full state as XML (ECC, row remapping)."),
    Command(
        "nvbandwidth-hbm",
        ("nvbandwidth", "-t", "device_local_copy"),
        "HBM copy bandwidth of each GPU.",
        timeout=600,
    ),
    Command(
        "nvbandwidth-nvlink",
        ("nvbandwidth", "-t", "device_to_device_bidirectional_memcpy_read_ce"),
        "GPU-to-GPU copies over NVLink in both directions at once, every pair.",
        timeout=600,
    ),
    Command("dmesg", ("dmesg",), "The kernel log (XID lines).", root=True),
    Command("nvidia-smi-nvlink", ("nvidia-smi", "nvlink", "-s"), "Each NVLink's state and speed, per GPU."),
    Command(
        "set-mtu",
        ("ip", "link", "set", "dev", "{interface}", "mtu", "{number}"),
        "Sets an interface's MTU.",
        placeholders=("interface", "number"),
        root=True,
    ),
    Command(
        "ethtool-channels",
        ("ethtool", "-l", "{interface}"),
        "RSS channels of an interface.",
        placeholders=("interface",),
    ),
    Command(
        "set-channels",
        ("ethtool", "-L", "{interface}", "combined", "{number}"),
        "Sets an interface's combined RSS channels.",
        placeholders=("interface", "number"),
        root=True,
    ),
    Command(
        "set-qos",
        ("mlnx_qos", "-i", "{interface}", "--trust", "dscp", "--pfc", "{pfc_mask}"),
        "Trusts DSCP and enables PFC on the given priorities.",
        placeholders=("interface", "pfc_mask"),
        root=True,
    ),
    Command("chronyc-tracking", ("chronyc", "tracking"), "Clock synchronisation (PTP hardware clock via chrony)."),
    Command("ipmitool-mc-info", ("ipmitool", "mc", "info"), "BMC firmware revision (/dev/ipmi0 is root's).", root=True),
    Command(
        "flash-firmware",
        ("fwupdmgr", "install", "--no-reboot-check", "--assume-yes", "{path}"),
        "Installs a staged firmware image.",
        timeout=1800,
        placeholders=("path",),
        root=True,
    ),
    Command(
        "apt-install",
        ("apt-get", "install", "-y", "--allow-downgrades", "--allow-change-held-packages", "{package}"),
        "Installs one package at a pinned version.",
        timeout=1800,
        placeholders=("package",),
        root=True,
    ),
    Command(
        "dpkg-version",
        ("dpkg-query", "-W", "-f=${Version}", "{package}"),
        "The installed version of a package.",
        placeholders=("package",),
    ),
    Command("nvcc-version", ("/usr/local/cuda/bin/nvcc", "--version"), "The CUDA toolkit's version."),
    Command("mpirun-version", ("mpirun", "--version"), "OpenMPI's version."),
    Command("python-versions", ("python3", "-c", PYTHON_VERSIONS_SCRIPT), "PyTorch and TensorFlow versions."),
    Command(
        "pip-install",
        ("python3", "-m", "pip", "install", "--no-input", "{requirement}"),
        "Installs a Python package at a pinned version.",
        timeout=1800,
        placeholders=("requirement",),
        root=True,
    ),
    Command("daemon-reload", ("systemctl", "daemon-reload"), "Makes systemd read changed unit files.", root=True),
    Command(
        "nccl-allreduce",
        ("all_reduce_perf", "-b", "8", "-e", "1G", "-f", "2", "-g", "{number}"),
        "NCCL all-reduce across the node's GPUs (reads /etc/nccl.conf).",
        timeout=900,
        placeholders=("number",),
    ),
    Command(
        "df-path", ("df", "-P", "-B1", "{path}"), "Space on the file system holding a path.", placeholders=("path",)
    ),
)
for _command in COMMANDS:
    if _command.name not in CATALOGUE:
        register_command(_command)
