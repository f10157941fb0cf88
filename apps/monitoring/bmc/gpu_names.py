"""Which GPU a BMC means. A BMC's sensors and its event log (SEL) count a node's GPUs from 1 ('GPU4 Temp', 'GPU4
HBM'); the portal's GPU indexes are nvidia-smi's, from 0 (an Xid event's 'GPU 3'). The same GPU read 'GPU 3' in one
place and 'GPU4' in the next, with nothing saying so. This is the one mapping between the two: every page that shows
a BMC's sensor or SEL record names the GPU index through it."""

import re

BMC_FIRST_GPU = 1  # the number a BMC gives the GPU that nvidia-smi calls GPU 0
_GPU = re.compile(r"\bGPU(\d+)\b")


def gpu_index(name: str) -> int | None:
    """The nvidia-smi index of the GPU a BMC's name speaks of: 'GPU4 HBM' -> 3; None when it names none."""
    match = _GPU.search(name)
    if match is None or int(match[1]) < BMC_FIRST_GPU:
        return None
    return int(match[1]) - BMC_FIRST_GPU


def with_gpu_index(name: str, *, source: str) -> str:
    """The BMC's name with the index beside its GPU: 'Memory GPU4 HBM' -> 'Memory GPU4 (SEL, = GPU 3) HBM'."""
    index = gpu_index(name)
    if index is None:
        return name
    return _GPU.sub(lambda match: f"{match[0]} ({source}, = GPU {index})", name, count=1)
