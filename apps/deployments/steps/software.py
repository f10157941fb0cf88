"""Phase 2 and 4: driver, CUDA, NCCL, OpenMPI and the frameworks at the plan's versions, the environment file, and
checkpoint settings on the chosen storage tier."""

from apps.deployments import catalogue
from apps.deployments.choices import Outcome, Phase, Problem
from apps.deployments.steps.base import Finding, Step, call, equal, excerpt, measured, parse, text_of
from apps.deployments.steps.hardware import query_gpus
from apps.deployments.steps.network import write_file
from apps.parsers import provisioning


def versions(node) -> dict:
    return node.options.get("versions") or {}


class Package(Step):
    """A system package at the plan's version: read its version, install the pinned package when it differs."""

    software: str
    phase = Phase.BASE

    def wanted(self, node) -> str:
        return versions(node)[self.software]

    def installed(self, node, outputs) -> tuple[str, str]:
        raise NotImplementedError

    def judge(self, node, outputs):
        value, evidence = self.installed(node, outputs)
        return [
            equal(
                self.software,
                "",
                value,
                self.wanted(node),
                what=catalogue.SOFTWARE_LABELS[self.software] + " version",
                problem=Problem.VERSION_DRIFT,
                evidence=evidence,
            )
        ]

    def fixes(self, node, findings):
        if findings is not None and all(finding.passed for finding in findings):
            return []
        specs = catalogue.packages(self.software, self.wanted(node), versions(node).get("cuda", ""))
        return [call("apt-install", f"apt:{spec}", package=spec) for spec in specs]


class Driver(Package):
    name, label, software = "driver", "GPU driver", "driver"
    disruptive = True
    reboot_after_fix = True  # the new kernel module loads only with the GPUs idle, after a reboot
    description = "The NVIDIA driver at the plan's version (nvidia-smi's driver_version)."

    def reads(self, node):
        return [call("nvidia-smi-query-gpu", "gpus")]

    def installed(self, node, outputs):
        gpus = query_gpus(outputs)
        found = sorted({gpu.driver_version or "" for gpu in gpus})
        return (found[0] if len(found) == 1 else ",".join(found)), f"driver_version: {', '.join(found)}"


class Cuda(Package):
    name, label, software = "cuda", "CUDA toolkit", "cuda"
    description = "The CUDA toolkit at the plan's version (nvcc --version)."

    def reads(self, node):
        return [call("nvcc-version", "nvcc")]

    def installed(self, node, outputs):
        text = text_of(outputs, "nvcc") if outputs["nvcc"].ok else ""
        if not text:
            return "not installed", excerpt(outputs["nvcc"].reason)
        return parse(outputs, "nvcc", provisioning.parse_nvcc_version).version, excerpt(text, "release")


class Nccl(Package):
    name, label, software = "nccl", "NCCL", "nccl"
    description = "libnccl2 at the plan's version."

    def reads(self, node):
        return [call("dpkg-version", "libnccl2", package="libnccl2")]

    def installed(self, node, outputs):
        if not outputs["libnccl2"].ok:
            return "not installed", outputs["libnccl2"].reason
        return parse(outputs, "libnccl2", provisioning.parse_package_version).version, outputs["libnccl2"].text


class OpenMpi(Package):
    name, label, software = "openmpi", "OpenMPI", "openmpi"
    description = "OpenMPI at the plan's version (mpirun --version)."

    def reads(self, node):
        return [call("mpirun-version", "mpirun")]

    def installed(self, node, outputs):
        if not outputs["mpirun"].ok:
            return "not installed", outputs["mpirun"].reason
        return parse(outputs, "mpirun", provisioning.parse_mpirun_version).version, outputs["mpirun"].text.strip()


class ConfigFile(Step):
    """A file the plan generates (an artefact): in place when the node's copy is the same, written when not."""

    path: str
    then: tuple[str, ...] = ()  # commands to run after writing (systemctl daemon-reload)

    def file_path(self, node) -> str:
        return self.path

    def reads(self, node):
        return [call("read-file", "file", path=self.file_path(node))]

    def judge(self, node, outputs):
        return [self.file_finding(node, outputs)]

    def file_finding(self, node, outputs) -> Finding:
        path = self.file_path(node)
        wanted = node.files.get(path, "")
        output = outputs["file"]
        present = output.ok
        same = present and output.text == wanted
        return Finding(
            check=self.name,
            subject=path,
            outcome=Outcome.PASS if same else Outcome.FAIL,
            value="as generated" if same else ("different" if present else "missing"),
            criterion=f"{path} as the plan generated it",
            evidence="" if same else (excerpt(output.text) if present else output.reason),
            problem="" if same else Problem.CONFIG_MISSING,
        )

    def fixes(self, node, findings):
        if findings is not None and all(finding.passed for finding in findings if finding.check == self.name):
            return []
        path = self.file_path(node)
        return [write_file(path, node.files.get(path, ""))] + [call(command) for command in self.then]


class Environment(ConfigFile):
    name, label = "environment", "Environment variables"
    phase = Phase.BASE
    path = "/etc/profile.d/rackpilot.sh"
    description = "CUDA paths, XLA on for TensorFlow, NCCL_DEBUG and the plan's own variables, for every login."


class Frameworks(Step):
    name, label = "frameworks", "PyTorch and TensorFlow"
    phase = Phase.SOFTWARE
    description = "PyTorch 2.x and TensorFlow 2.12+ (XLA on through the environment file) at the plan's versions."

    PACKAGES = (("pytorch", "torch"), ("tensorflow", "tensorflow"))

    def reads(self, node):
        return [call("python-versions", "python")]

    def judge(self, node, outputs):
        found = parse(outputs, "python", provisioning.parse_python_versions).versions
        text = text_of(outputs, "python")
        return [
            equal(
                name,
                "",
                found.get(module) or "not installed",
                versions(node)[name],
                what=catalogue.SOFTWARE_LABELS[name] + " version",
                problem=Problem.VERSION_DRIFT,
                evidence=excerpt(text, module),
            )
            for name, module in self.PACKAGES
            if versions(node).get(name)
        ]

    def fixes(self, node, findings):
        failing = None if findings is None else {f.check for f in findings if not f.passed}
        return [
            call("pip-install", f"pip:{name}", requirement=catalogue.pip_requirement(name, versions(node)[name]))
            for name, _ in self.PACKAGES
            if versions(node).get(name) and (failing is None or name in failing)
        ]


class Checkpoints(ConfigFile):
    name, label = "checkpoints", "Checkpoint settings"
    phase = Phase.SOFTWARE
    path = "/etc/rackpilot/checkpoint.yaml"
    description = "Checkpoints every N steps to the chosen storage tier, which is mounted and has room."

    def reads(self, node):
        mount = node.option("checkpoints", "mount")
        return super().reads(node) + [call("df-path", "df", path=mount)]

    def judge(self, node, outputs):
        findings = [self.file_finding(node, outputs)]
        mount = node.option("checkpoints", "mount")
        systems = parse(outputs, "df", provisioning.parse_df).file_systems
        # df names the file system holding the path: the longest mount point that is a prefix of it.
        holding = [
            fs for fs in systems if mount == fs.mount_point or mount.startswith(fs.mount_point.rstrip("/") + "/")
        ]
        system = max(holding, key=lambda fs: len(fs.mount_point), default=None)
        if system is None or system.mount_point != mount:
            findings.append(
                Finding(
                    check="checkpoint_mount",
                    subject=mount,
                    outcome=Outcome.FAIL,
                    value=system.mount_point if system else "nothing",
                    criterion=f"{mount} is a mount point",
                    evidence=excerpt(text_of(outputs, "df")),
                    problem=Problem.CHECKPOINT_MOUNT,
                )
            )
            return findings
        free_pct = 100.0 * system.available_bytes / system.size_bytes if system.size_bytes else 0.0
        findings.append(
            measured(
                "checkpoint_space",
                mount,
                free_pct,
                node.criteria["checkpoint_free_space"],
                problem=Problem.DISK_FULL,
                evidence=excerpt(text_of(outputs, "df")),
            )
        )
        return findings
