"""The deployment plan: every step in the order a node goes through them, phase by phase."""

from apps.deployments.steps.base import Call, Finding, NodeContext, Output, Step
from apps.deployments.steps.cluster import Cgroup, Discovery, NcclEnvironment, Topology
from apps.deployments.steps.hardware import EccClean, Firmware, GpuInventory, HbmBandwidth, NvlinkBandwidth, PcieLinks
from apps.deployments.steps.network import Mtu, NicLinks, Ptp, Roce, RssQueues
from apps.deployments.steps.software import Checkpoints, Cuda, Driver, Environment, Frameworks, Nccl, OpenMpi

PLAN: tuple[Step, ...] = (
    # 1. Environment preparation
    GpuInventory(),
    HbmBandwidth(),
    NvlinkBandwidth(),
    PcieLinks(),
    EccClean(),
    Firmware(),
    NicLinks(),
    Mtu(),
    RssQueues(),
    Roce(),
    Ptp(),
    # 2. Base environment
    Driver(),
    Cuda(),
    Nccl(),
    OpenMpi(),
    Environment(),
    # 3. Cluster
    Discovery(),
    Topology(),
    Cgroup(),
    NcclEnvironment(),
    # 4. Software stack
    Frameworks(),
    Checkpoints(),
)
STEPS: dict[str, Step] = {step.name: step for step in PLAN}
DISRUPTIVE = tuple(step.name for step in PLAN if step.disruptive)

__all__ = ["DISRUPTIVE", "PLAN", "STEPS", "Call", "Finding", "NodeContext", "Output", "Step"]
