"""NICs: ip link (JSON and text), ethtool (settings and -i), mlnx_qos, ibstat and ibv_devinfo for RoCE ports."""

import json

from apps.inventory.choices import MTU_MAX, MTU_MIN
from apps.nodeexec.catalogue import SECTION_MARK
from apps.simulator.digits import is_whole_number
from apps.simulator.model import noise, rdma_active_mtu
from apps.simulator.state import MLX5_DRIVER_VERSION, SimNic
from apps.simulator.terminal import CommandOutput, Context, fail, ok
from apps.simulator.tools.common import option_value

IB_MTU_CODES = {256: 1, 512: 2, 1024: 3, 2048: 4, 4096: 5}

# --- ip link ----------------------------------------------------------------------------------------------------


def _flags(nic: SimNic) -> list[str]:
    return (
        ["BROADCAST", "MULTICAST", "UP", "LOWER_UP"] if nic.link_up else ["NO-CARRIER", "BROADCAST", "MULTICAST", "UP"]
    )


def _links(context: Context) -> list[tuple[int, SimNic | None]]:
    """(ifindex, NIC) with the loopback first, as the kernel numbers them."""
    return [(1, None)] + [(position + 2, nic) for position, nic in enumerate(context.state.nics)]


def _json_link(ifindex: int, nic: SimNic | None) -> dict:
    if nic is None:
        return {
            "ifindex": 1,
            "ifname": "lo",
            "flags": ["LOOPBACK", "UP", "LOWER_UP"],
            "mtu": 65536,
            "qdisc": "noqueue",
            "operstate": "UNKNOWN",
            "linkmode": "DEFAULT",
            "group": "default",
            "txqlen": 1000,
            "link_type": "loopback",
            "address": "00:00:00:00:00:00",
            "broadcast": "00:00:00:00:00:00",
        }
    link = {
        "ifindex": ifindex,
        "ifname": nic.name,
        "flags": _flags(nic),
        "mtu": nic.mtu,
        "qdisc": "mq",
        "operstate": "UP" if nic.link_up else "DOWN",
        "linkmode": "DEFAULT",
        "group": "default",
        "txqlen": 1000,
        "link_type": "ether",
        "address": nic.mac,
        "broadcast": "ff:ff:ff:ff:ff:ff",
    }
    if nic.pci_address:
        link["altnames"] = [f"enp{int(nic.pci_address.split(':')[1], 16)}s0np0"]
    return link


def _text_link(ifindex: int, nic: SimNic | None) -> str:
    if nic is None:
        return (
            "1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN mode DEFAULT group default qlen 1000\n"
            "    link/loopback 00:00:00:00:00:00 brd 00:00:00:00:00:00\n"
        )
    state = "UP" if nic.link_up else "DOWN"
    text = (
        f"{ifindex}: {nic.name}: <{','.join(_flags(nic))}> mtu {nic.mtu} qdisc mq state {state} mode DEFAULT "
        f"group default qlen 1000\n    link/ether {nic.mac} brd ff:ff:ff:ff:ff:ff\n"
    )
    for altname in _json_link(ifindex, nic).get("altnames", []):
        text += f"    altname {altname}\n"
    return text


def ip_link_set(context: Context, args: list[str]) -> CommandOutput:
    """ip link set [dev] IF mtu N: the only setting the simulator changes."""
    if args[:1] == ["dev"]:
        args = args[1:]
    if not args:
        return fail(255, 'Not enough information: "dev" argument is required.\n')
    name, settings = args[0], args[1:]
    nic = context.state.nic(name)
    if nic is None:
        return fail(1, f'Cannot find device "{name}"\n')
    if len(settings) != 2 or settings[0] != "mtu":
        return fail(255, "ip: the simulator sets only the mtu with ip link set\n")
    if not is_whole_number(settings[1]):
        return fail(255, f'Error: argument "{settings[1]}" is wrong: Invalid "mtu" value\n\n')
    mtu = int(settings[1])
    if mtu > MTU_MAX:
        return fail(2, "Error: mtu greater than device maximum.\n")
    if mtu < MTU_MIN:
        return fail(2, "Error: mtu less than device minimum.\n")
    context.change(f"nic:{nic.name}:mtu", mtu)
    return ok("")


def ip(context: Context, argv: list[str]) -> CommandOutput:
    args = argv[1:]
    as_json = False
    while args and args[0].startswith("-"):
        as_json = as_json or args[0] in ("-j", "-json", "--json")
        args = args[1:]
    if not args or args[0] not in ("link", "l", "li", "lin"):
        return fail(255, 'Object "{}" is unknown, try "ip help".\n'.format(args[0] if args else ""))
    args = args[1:]
    if args[:1] == ["set"]:
        return ip_link_set(context, args[1:])
    if args[:1] == ["show"]:
        args = args[1:]
    if args[:1] == ["dev"]:
        args = args[1:]
    links = _links(context)
    if args:
        links = [(index, nic) for index, nic in links if (nic.name if nic else "lo") == args[0]]
        if not links:
            return fail(1, f'Device "{args[0]}" does not exist.\n')
    if as_json:
        return ok(json.dumps([_json_link(index, nic) for index, nic in links], separators=(",", ":")) + "\n")
    return ok("".join(_text_link(index, nic) for index, nic in links))


# --- ethtool ----------------------------------------------------------------------------------------------------

LINK_MODES_400G = [
    "1000baseKX/Full",
    "10000baseKR/Full",
    "40000baseKR4/Full",
    "40000baseCR4/Full",
    "40000baseSR4/Full",
    "40000baseLR4/Full",
    "25000baseCR/Full",
    "25000baseKR/Full",
    "25000baseSR/Full",
    "50000baseCR2/Full",
    "50000baseKR2/Full",
    "100000baseKR4/Full",
    "100000baseSR4/Full",
    "100000baseCR4/Full",
    "100000baseLR4_ER4/Full",
    "50000baseKR/Full",
    "50000baseSR/Full",
    "50000baseCR/Full",
    "200000baseKR4/Full",
    "200000baseSR4/Full",
    "200000baseCR4/Full",
    "100000baseKR2/Full",
    "100000baseSR2/Full",
    "100000baseCR2/Full",
    "200000baseKR2/Full",
    "200000baseSR2/Full",
    "200000baseCR2/Full",
    "400000baseKR4/Full",
    "400000baseSR4/Full",
    "400000baseCR4/Full",
    "400000baseDR4/Full",
]
LINK_MODES_25G = ["1000baseT/Full", "10000baseT/Full", "25000baseCR/Full", "25000baseSR/Full"]


def _modes(modes: list[str], first_label: str) -> list[str]:
    lines, pad = [], " " * 24
    for position in range(0, len(modes), 3):
        chunk = " ".join(modes[position : position + 3])
        lines.append(f"\t{first_label:<24}{chunk}" if position == 0 else f"\t{pad}{chunk}")
    return lines


def _ethtool_settings(nic: SimNic) -> str:
    modes = [
        mode
        for mode in (LINK_MODES_400G if nic.speed_gbps > 25 else LINK_MODES_25G)
        if int(mode.split("base")[0]) <= nic.speed_gbps * 1000
    ]
    port = "FIBRE" if nic.speed_gbps > 25 else "Direct Attach Copper"
    lines = [f"Settings for {nic.name}:", "\tSupported ports: [ Backplane ]"]
    lines += _modes(modes, "Supported link modes:")
    lines += [
        "\tSupported pause frame use: Symmetric",
        "\tSupports auto-negotiation: Yes",
        "\tSupported FEC modes: None\t RS\t BASER\t LLRS",
    ]
    lines += _modes(modes, "Advertised link modes:")
    lines += [
        "\tAdvertised pause frame use: Symmetric",
        "\tAdvertised auto-negotiation: Yes",
        "\tAdvertised FEC modes: None\t RS\t BASER\t LLRS",
        "\tLink partner advertised link modes:  Not reported",
        "\tLink partner advertised pause frame use: No",
        "\tLink partner advertised auto-negotiation: Yes",
        "\tLink partner advertised FEC modes: Not reported",
    ]
    if nic.link_up:
        lanes = 4 if nic.speed_gbps >= 100 else 1
        lines += [f"\tSpeed: {nic.effective_speed_gbps * 1000}Mb/s", f"\tLanes: {lanes}", "\tDuplex: Full"]
    else:
        lines += ["\tSpeed: Unknown!", "\tLanes: Unknown!", "\tDuplex: Unknown! (255)"]
    lines += [
        "\tAuto-negotiation: on",
        f"\tPort: {port if nic.link_up else 'Other'}",
        "\tPHYAD: 0",
        "\tTransceiver: internal",
        "\tSupports Wake-on: d",
        "\tWake-on: d",
        "        Current message level: 0x00000004 (4)",
        "                               link",
        f"\tLink detected: {'yes' if nic.link_up else 'no'}",
    ]
    return "\n".join(lines) + "\n"


def _ethtool_driver(nic: SimNic) -> str:
    if nic.rdma_device:
        driver, version, firmware = "mlx5_core", MLX5_DRIVER_VERSION, f"{nic.firmware} (MT_0000000838)"
    else:
        driver, version, firmware = "ice", "6.8.0-60-generic", f"{nic.firmware} 0x8001c967 1.3534.0"
    return (
        f"driver: {driver}\nversion: {version}\nfirmware-version: {firmware}\nexpansion-rom-version: \n"
        f"bus-info: {nic.pci_address or '0000:c1:00.0'}\nsupports-statistics: yes\nsupports-test: yes\n"
        "supports-eeprom-access: no\nsupports-register-dump: no\nsupports-priv-flags: yes\n"
    )


def _ethtool_channels(nic: SimNic) -> str:
    """ethtool -l as ethtool 6.x prints it over netlink: n/a for the counts the driver does not report."""

    def block(combined: int) -> list[str]:
        return ["RX:\t\tn/a", "TX:\t\tn/a", "Other:\t\tn/a", f"Combined:\t{combined}"]

    lines = [f"Channel parameters for {nic.name}:", "Pre-set maximums:", *block(nic.max_channels)]
    lines += ["Current hardware settings:", *block(nic.channels)]
    return "\n".join(lines) + "\n"


def _ethtool_stats(context: Context, nic: SimNic) -> str:
    """ethtool -S as mlx5 prints it (a subset of its counters). The model: traffic from the seed, plus the RDMA bytes
    the runs across nodes moved through the NIC (in frames of the RoCE path MTU); PFC pause frames on each enabled
    priority; a RoCE NIC with PFC off on every priority drops what it cannot buffer (rx_discards_phy); a degraded
    cable corrupts frames in proportion to the frames it carries (rx_crc_errors_phy, each with an uncorrectable symbol
    error, rx_symbol_err_phy); a link that went down counts one link-down event."""
    rng = noise(context.seed, context.hostname, nic.name, "ethtool-S")
    base = rng.randrange(800_000_000, 900_000_000)
    frames = nic.traffic_bytes // rdma_active_mtu(nic.mtu)
    packets = base + frames
    corrupted = packets * nic.crc_errors_per_million // 1_000_000
    counters = {
        "rx_packets": packets,
        "rx_bytes": base * 2_600 + rng.randrange(1000) + nic.traffic_bytes,
        "tx_packets": packets + rng.randrange(10_000_000, 50_000_000),
        "tx_bytes": base * 2_900 + rng.randrange(1000) + nic.traffic_bytes,
        "rx_out_of_buffer": 0,
        "rx_crc_errors_phy": corrupted,
        "rx_symbol_err_phy": corrupted,
        "rx_discards_phy": packets // 4000 + rng.randrange(100) if nic.rdma_device and not nic.pfc_priorities else 0,
        "link_down_events_phy": 0 if nic.link_up else 1,
    }
    for priority in range(8):
        pauses = packets // 2500 + rng.randrange(1000) if priority in nic.pfc_priorities and nic.rdma_device else 0
        counters[f"rx_prio{priority}_pause"] = pauses
        counters[f"tx_prio{priority}_pause"] = pauses // 3
    return "NIC statistics:\n" + "".join(f"     {name}: {value}\n" for name, value in counters.items())


def ethtool_set_channels(context: Context, args: list[str]) -> CommandOutput:
    """ethtool -L IF combined N."""
    if len(args) < 3:
        return fail(1, "ethtool: bad command line argument(s)\nFor more information run ethtool -h\n")
    nic = context.state.nic(args[0])
    if nic is None:
        return fail(1, f"netlink error: no device matches name ({args[0]})\n")
    if args[1:] and (len(args) != 3 or args[1] != "combined"):
        return fail(1, "ethtool: the simulator sets only combined channels with -L\n")
    if not is_whole_number(args[2]):
        return fail(1, f'ethtool: bad command line argument(s)\nethtool: invalid value "{args[2]}"\n')
    count = int(args[2])
    if count < 1 or count > nic.max_channels:
        return fail(1, "Cannot set device channel parameters: Invalid argument\n")
    context.change(f"nic:{nic.name}:channels", count)
    return ok("")


def ethtool(context: Context, argv: list[str]) -> CommandOutput:
    args = argv[1:]
    if not args:
        return fail(1, "ethtool: bad command line argument(s)\nFor more information run ethtool -h\n")
    if args[0] in ("-L", "--set-channels"):
        return ethtool_set_channels(context, args[1:])
    option = args[0] if args[0].startswith("-") else None
    name = args[-1]
    nic = context.state.nic(name)
    if nic is None:
        return (
            fail(71, f"netlink error: no device matches name ({name})\n")
            if option is None
            else fail(1, "Cannot get driver information: No such device\n")
        )
    if option is None:
        return ok(_ethtool_settings(nic))
    if option in ("-i", "--driver"):
        return ok(_ethtool_driver(nic))
    if option in ("-l", "--show-channels"):
        return ok(_ethtool_channels(nic))
    if option in ("-S", "--statistics"):
        return ok(_ethtool_stats(context, nic))
    return fail(1, f"ethtool: option {option} is not simulated\n")


# --- mlnx_qos ---------------------------------------------------------------------------------------------------


def _pfc_flags(text: str) -> list[int] | None:
    """'0,0,0,1,0,0,0,0' -> [3]: the enabled priorities of mlnx_qos --pfc, or None when it is not 8 flags."""
    flags = text.split(",")
    if len(flags) != 8 or any(flag not in ("0", "1") for flag in flags):
        return None
    return [priority for priority, flag in enumerate(flags) if flag == "1"]


def mlnx_qos(context: Context, argv: list[str]) -> CommandOutput:
    name = option_value(argv[1:], "-i", "--interface")
    nic = context.state.nic(name) if name else None
    if nic is None or not nic.rdma_device:
        return fail(1, f"Interface {name} not found or not a Mellanox device\n")
    trust = option_value(argv[1:], "--trust")
    pfc = option_value(argv[1:], "-f", "--pfc")
    if trust is not None and trust not in ("pcp", "dscp"):
        return fail(
            2,
            f"Usage: mlnx_qos -i <interface> [options]\n\nmlnx_qos: error: option --trust: invalid choice: "
            f"'{trust}' (choose from 'pcp', 'dscp')\n",
        )
    priorities = _pfc_flags(pfc) if pfc is not None else None
    if pfc is not None and priorities is None:
        return fail(1, f"Invalid pfc: {pfc!r}; give 8 comma-separated 0/1 flags, e.g. 0,0,0,1,0,0,0,0\n")
    if trust is not None:
        context.change(f"nic:{nic.name}:trust", trust)
    if priorities is not None:
        context.change(f"nic:{nic.name}:pfc", priorities)
    enabled = ["1" if priority in nic.pfc_priorities else "0" for priority in range(8)]
    lines = ["DCBX mode: OS controlled", f"Priority trust state: {nic.trust}"]
    if nic.trust == "dscp":
        lines.append("dscp2prio mapping:")
        for priority in range(8):
            dscps = ",".join(f"{dscp:02d}" for dscp in range(priority * 8 + 7, priority * 8 - 1, -1))
            lines.append(f"        prio:{priority} dscp:{dscps},")
    lines += [
        "Cable len: 7",
        "PFC configuration:",
        "        priority    0   1   2   3   4   5   6   7",
        "        enabled     " + "   ".join(enabled) + "   ",
        "        buffer      " + "   ".join("1" if flag == "1" else "0" for flag in enabled) + "   ",
    ]
    # mlx5's default ETS map: priority 0 in tc1, priority 1 in tc0, the rest in their own class.
    for tc in range(8):
        priority = {0: 1, 1: 0}.get(tc, tc)
        lines += [f"tc: {tc} ratelimit: unlimited, tsa: vendor", f"         priority:  {priority}"]
    return ok("\n".join(lines) + "\n")


# --- ibstat / ibv_devinfo ---------------------------------------------------------------------------------------


def _guid(nic: SimNic) -> str:
    octets = nic.mac.split(":")
    return "".join(octets[:3]) + "0300" + "".join(octets[3:])


def ibstat(context: Context, argv: list[str]) -> CommandOutput:
    nics = context.state.rdma_nics
    wanted = [arg for arg in argv[1:] if not arg.startswith("-")]
    if wanted:
        nics = [nic for nic in nics if nic.rdma_device == wanted[0]]
        if not nics:
            return fail(255, f"ibpanic: [{wanted[0]}] main: '{wanted[0]}' IB device can't be found: No such device\n")
    blocks = []
    for nic in nics:
        up = nic.link_up
        blocks.append(
            f"CA '{nic.rdma_device}'\n"
            "\tCA type: MT4129\n"
            "\tNumber of ports: 1\n"
            f"\tFirmware version: {nic.firmware}\n"
            "\tHardware version: 0\n"
            f"\tNode GUID: 0x{_guid(nic)}\n"
            f"\tSystem image GUID: 0x{_guid(nic)}\n"
            "\tPort 1:\n"
            f"\t\tState: {'Active' if up else 'Down'}\n"
            f"\t\tPhysical state: {'LinkUp' if up else 'Disabled'}\n"
            f"\t\tRate: {nic.effective_speed_gbps if up else 10}\n"
            "\t\tBase lid: 0\n"
            "\t\tLMC: 0\n"
            "\t\tSM lid: 0\n"
            "\t\tCapability mask: 0x00010000\n"
            f"\t\tPort GUID: 0x{_guid(nic)[:6]}fffe{_guid(nic)[10:]}\n"
            "\t\tLink layer: Ethernet\n"
        )
    return ok("".join(blocks))


def ibv_devinfo(context: Context, argv: list[str]) -> CommandOutput:
    device = option_value(argv[1:], "-d", "--ib-dev")
    nics = [nic for nic in context.state.rdma_nics if device in (None, nic.rdma_device)]
    if not nics:
        return fail(255, "No IB devices found\n" if device is None else f"IB device '{device}' wasn't found\n")
    blocks = []
    for nic in nics:
        active_mtu = rdma_active_mtu(nic.mtu)
        state = "PORT_ACTIVE (4)" if nic.link_up else "PORT_DOWN (1)"
        guid = _guid(nic)
        dotted = ":".join(guid[i : i + 4] for i in range(0, 16, 4))
        blocks.append(
            f"hca_id:\t{nic.rdma_device}\n"
            "\ttransport:\t\t\tInfiniBand (0)\n"
            f"\tfw_ver:\t\t\t\t{nic.firmware}\n"
            f"\tnode_guid:\t\t\t{dotted}\n"
            f"\tsys_image_guid:\t\t\t{dotted}\n"
            "\tvendor_id:\t\t\t0x02c9\n"
            "\tvendor_part_id:\t\t\t4129\n"
            "\thw_ver:\t\t\t\t0x0\n"
            "\tboard_id:\t\t\tMT_0000000838\n"
            "\tphys_port_cnt:\t\t\t1\n"
            "\t\tport:\t1\n"
            f"\t\t\tstate:\t\t\t{state}\n"
            "\t\t\tmax_mtu:\t\t4096 (5)\n"
            f"\t\t\tactive_mtu:\t\t{active_mtu} ({IB_MTU_CODES[active_mtu]})\n"
            "\t\t\tsm_lid:\t\t\t0\n"
            "\t\t\tport_lid:\t\t0\n"
            "\t\t\tport_lmc:\t\t0x00\n"
            "\t\t\tlink_layer:\t\tEthernet\n"
        )
    return ok("\n".join(blocks))


# --- sh -c NIC_FACTS_SCRIPT ----------------------------------------------------------------------------------------

NIC_FACTS_TOOLS = (("ethtool", ("ethtool",)), ("ethtool-i", ("ethtool", "-i")), ("mlnx_qos", ("mlnx_qos", "-i")))


def nic_facts(context: Context, interfaces: str) -> CommandOutput:
    """What the catalogue's NIC facts script prints: per interface, each tool's stdout between section marks, then
    its exit status and stderr (trailing newlines dropped, as $(...) drops them)."""
    sections = []
    for name in interfaces.split(","):
        if context.state.nic(name) is None:
            sections.append(f"{SECTION_MARK} absent {name}\n")
            continue
        for line, (tool, argv) in enumerate(NIC_FACTS_TOOLS, start=7):
            result = context.run([*argv, name])
            stderr = f"sh: {line}: {argv[0]}: not found" if result.exit_code == 127 else result.stderr.rstrip("\n")
            sections.append(
                f"{SECTION_MARK} {tool} {name}\n{result.stdout}{SECTION_MARK} exit {result.exit_code}\n{stderr}\n"
            )
    return ok("".join(sections))


COMMANDS = {"ip": ip, "ethtool": ethtool, "mlnx_qos": mlnx_qos, "ibstat": ibstat, "ibv_devinfo": ibv_devinfo}
