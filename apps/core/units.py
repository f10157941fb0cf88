"""Units as every page writes them: a link's rate in bits per second is Gb/s (Tb/s from 1,000 Gb/s when that reads
exactly), never Gbps beside Gb/s, nor GB/s, which is bytes (issue 27, walk 11). Bus and copy bandwidths are GB/s. A
share is a whole percent that never rounds to 100 or 0 when it is not."""


def link_rate(gbps: float) -> str:
    """200 -> '200 Gb/s', 1600 -> '1.6 Tb/s', 103650 -> '103650 Gb/s'."""
    if gbps >= 1000 and gbps % 100 == 0:
        return f"{gbps / 1000:g} Tb/s"
    return f"{gbps:g} Gb/s"


def percent(share: float) -> str:
    """0.5 -> '50 %'; 327/328 -> '99.7 %', not a '100 %' that hides the failed GPU; 1/328 -> '0.3 %'."""
    value = 100 * share
    for places in range(4):
        text = f"{value:.{places}f}"
        if (float(text) < 100 or share >= 1) and (float(text) > 0 or share <= 0):
            return f"{text} %"
    return "> 99.999 %" if share > 0.5 else "< 0.001 %"


def size(count: int) -> str:
    """Bytes in binary units, as nccl-tests' sizes are: 4294967296 -> '4 GiB', 1536 -> '1.5 KiB', 8 -> '8 B'."""
    for unit, factor in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if count >= factor:
            return f"{count / factor:g} {unit}"
    return f"{count} B"
