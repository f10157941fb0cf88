"""Units as every page writes them: a link's rate in bits per second is Gb/s (Tb/s from 1,000 Gb/s when that reads
exactly), never Gbps beside Gb/s, nor GB/s, which is bytes (issue 27, walk 11). Bus and copy bandwidths are GB/s."""


def link_rate(gbps: float) -> str:
    """200 -> '200 Gb/s', 1600 -> '1.6 Tb/s', 103650 -> '103650 Gb/s'."""
    if gbps >= 1000 and gbps % 100 == 0:
        return f"{gbps / 1000:g} Tb/s"
    return f"{gbps:g} Gb/s"
