"""lscpu, numactl -H, lsblk -J, /proc/meminfo and sysfs MTU/speed from the H200 node."""

from apps.parsers.system import parse_lsblk, parse_lscpu, parse_meminfo, parse_net_mtu_speed, parse_numactl

from .helpers import assert_parse_error, real


def test_lscpu_text_and_json_agree():
    text = parse_lscpu(real("h200-1gpu/lscpu.txt"))
    json_report = parse_lscpu(real("h200-1gpu/lscpu.json"))

    assert text.to_dict() == json_report.to_dict()
    assert (text.architecture, text.cpus, text.sockets, text.cores_per_socket, text.threads_per_core) == (
        "x86_64",
        16,
        1,
        16,
        1,
    )
    assert text.numa_nodes == 1 and text.numa_node_cpus == {"0": list(range(16))}
    assert text.hypervisor == "KVM" and "avx512f" in text.flags


def test_numactl_nodes_and_distances():
    topology = parse_numactl(real("h200-1gpu/numactl-H.txt"))

    [node] = topology.nodes
    assert (node.node, node.cpus, node.size_mb, node.free_mb) == (0, list(range(16)), 4443, 3227)
    assert topology.distances == [[10]]


def test_lsblk_sizes_in_bytes_and_mountpoints():
    devices = {device.name: device for device in parse_lsblk(real("h200-1gpu/lsblk.json")).devices}

    assert devices["vda"].size_bytes == 274877906944 and devices["vda"].mountpoints == ["/"]
    assert devices["vda"].rotational is True and devices["vda"].transport == "virtio"
    assert devices["zram0"].rotational is False and devices["zram0"].model is None


def test_lsblk_nested_children_and_human_sizes():
    text = (
        '{"blockdevices": [{"name": "nvme0n1", "size": "3.5T", "type": "disk", "rota": "0", "tran": "nvme",'
        ' "mountpoints": [null], "children": [{"name": "nvme0n1p1", "size": "3.5T", "type": "part",'
        ' "mountpoints": ["/raid"]}]}]}'
    )

    [disk] = parse_lsblk(text).devices

    assert disk.size_bytes is None and disk.size == "3.5T" and disk.rotational is False
    assert disk.mountpoints == [] and disk.children[0].mountpoints == ["/raid"]


def test_meminfo():
    memory = parse_meminfo(real("h200-1gpu/proc-meminfo.txt"))

    assert memory.mem_total_kib == 131981020
    assert memory.mem_available_kib == 131487808
    assert (memory.hugepages_total, memory.hugepage_size_kib) == (0, 2048)
    assert memory.values["DirectMap1G"] == 133169152


def test_sysfs_mtu_and_unknown_speed():
    interfaces = parse_net_mtu_speed(real("h200-1gpu/sys-class-net-mtu-speed.txt")).by_name()

    assert interfaces["eth0"].mtu == 1400 and interfaces["eth0"].speed_mbps is None  # sysfs said -1
    assert interfaces["lo"].mtu == 65536
    assert parse_net_mtu_speed("ens1f0np0 9000 100000\n").interfaces[0].speed_mbps == 100000


def test_not_system_output_is_rejected():
    assert_parse_error(parse_lscpu, "", 1, "empty input")
    assert_parse_error(parse_lscpu, "no colon here\n", 1, "Field: value")
    assert_parse_error(parse_lscpu, '{"cpus": 1}', 1, "'lscpu' list")
    assert_parse_error(parse_numactl, real("h200-1gpu/lscpu.txt"), 1, "available: N nodes")
    assert_parse_error(parse_lsblk, '{"blockdevices": [', 1, "lsblk -J JSON")
    assert_parse_error(parse_meminfo, "MemTotal:       131981020 kB\nbroken line\n", 2, "MemTotal: 1024 kB")
    assert_parse_error(parse_meminfo, "Cached: 1 kB\n", 1, "'MemTotal:'")
    assert_parse_error(parse_net_mtu_speed, "eth0 1400\neth1 fast\n", 2, "<interface> <mtu>")
