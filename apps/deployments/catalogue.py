"""What a deployment may install: the software versions Rackpilot knows how to install and check, and how each
becomes a package to install. A version outside these lists is refused (400 naming the field)."""

from apps.inventory.choices import FirmwareComponent

SOFTWARE: dict[str, tuple[str, ...]] = {
    "driver": ("550.163.01", "570.172.08", "580.159.04"),
    "cuda": ("12.4", "12.8", "13.0"),
    "nccl": ("2.21.5", "2.26.2", "2.27.7", "2.28.3"),
    "openmpi": ("4.1.6", "5.0.7"),
    "pytorch": ("2.5.1", "2.7.1", "2.9.0"),
    "tensorflow": ("2.12.1", "2.16.2", "2.19.0"),
}
SOFTWARE_LABELS = {
    "driver": "GPU driver",
    "cuda": "CUDA toolkit",
    "nccl": "NCCL",
    "openmpi": "OpenMPI",
    "pytorch": "PyTorch",
    "tensorflow": "TensorFlow (with XLA)",
}
# The words a plan's versions and firmware baselines are shown in, on every page (the wizard's form asks in them too).
OPTION_LABELS = {"versions": SOFTWARE_LABELS, "baselines": dict(FirmwareComponent.choices)}
# The newest CUDA each driver branch runs (NVIDIA's CUDA/driver compatibility table).
DRIVER_CUDA = {"550": "12.4", "560": "12.6", "570": "12.8", "575": "12.9", "580": "13.0"}

FIRMWARE_DIR = "/var/lib/rackpilot/firmware"


def option_rows(options: dict, section: str) -> list[tuple[str, object]]:
    """A plan's versions or firmware baselines as (label, value) rows: "GPU VBIOS", never the key "gpu_vbios"."""
    labels = OPTION_LABELS[section]
    return [(labels.get(name, name), value) for name, value in (options.get(section) or {}).items()]


def version_key(version: str) -> tuple:
    return tuple(int(part) if part.isdigit() else part for part in version.replace("-", ".").split("."))


def newest(name: str) -> str:
    return max(SOFTWARE[name], key=version_key)


def cuda_for_driver(driver: str) -> str | None:
    return DRIVER_CUDA.get(driver.split(".")[0])


def compatibility_errors(versions: dict) -> dict[str, str]:
    """Pairs that cannot work together, by field: CUDA newer than the driver runs, NCCL built for another CUDA."""
    errors = {}
    driver, cuda = versions.get("driver", ""), versions.get("cuda", "")
    supported = cuda_for_driver(driver) if driver else None
    if supported and cuda and version_key(cuda) > version_key(supported):
        errors["versions.cuda"] = f"CUDA {cuda} needs a newer driver than {driver} (it runs CUDA up to {supported})."
    return errors


def packages(name: str, version: str, cuda: str) -> list[str]:
    """The apt package specs that install `name` at `version` (NVIDIA's CUDA repository names)."""
    if name == "driver":
        return [f"cuda-drivers={version}-1"]
    if name == "cuda":
        major, minor = version.split(".")[:2]
        return [f"cuda-toolkit-{major}-{minor}"]
    if name == "nccl":
        return [f"libnccl2={version}-1+cuda{cuda}", f"libnccl-dev={version}-1+cuda{cuda}"]
    if name == "openmpi":
        return [f"openmpi-bin={version}-1"]
    raise KeyError(name)


def pip_requirement(name: str, version: str) -> str:
    return f"{'torch' if name == 'pytorch' else name}=={version}"


def firmware_image(component: str, version: str) -> str:
    return f"{FIRMWARE_DIR}/{component}/{version}.cab"
