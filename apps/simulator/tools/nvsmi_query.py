"""nvidia-smi -q and -q -x, from one layout that names each field's text label and XML tag (driver 580's order).

A field is printed in the text report as '<indent><label><padding>: <value>' and in the XML as '<tag>value</tag>';
a few exist in one form only (label or tag None). `-d` keeps the sections of the named displays, as the real tool does.
"""

import zlib
from collections.abc import Callable
from dataclasses import dataclass
from xml.sax.saxutils import escape

from apps.simulator.model import GpuReading
from apps.simulator.state import DRIVER_VERSION, SimGpu
from apps.simulator.terminal import CommandOutput, Context, ok
from apps.simulator.tools.common import ctime, memory_used_mib, reading

LABEL_WIDTH = 55  # the text report pads every label (with its indent) to this column before ': '
SLOWDOWN_TEMP_C = 87
NA = "N/A"


@dataclass(frozen=True)
class View:
    """One GPU as the report sees it."""

    index: int
    gpu: SimGpu
    now: GpuReading
    load: float
    xml: bool
    driver: str = DRIVER_VERSION


Value = str | Callable[[View], str]


@dataclass(frozen=True)
class F:
    label: str | None
    tag: str | None
    value: Value
    nest: int = 0  # extra text indent: HW Slowdown's variants sit under it in text, beside it in XML


@dataclass(frozen=True)
class S:
    label: str | None
    tag: str | None
    children: tuple
    display: str = ""  # the -d display this top-level section belongs to
    only: str = ""  # "full": omitted under -d; "display": printed only under -d


@dataclass(frozen=True)
class Block:
    """An XML element holding bare text on its own line (or nothing), such as <mig_devices>None</mig_devices>."""

    tag: str
    text: str = ""


def fabric(value: str | Callable[[SimGpu], str]) -> Callable[[View], str]:
    """A Fabric field: N/A on a GPU outside a multi-node NVLink fabric (an HGX board), else its value (GB200 tray)."""

    def field(view: View) -> str:
        if view.gpu.fabric_cluster_uuid is None:
            return NA
        return value(view.gpu) if callable(value) else value

    return field


def hexed(text_value: Callable[[View], str], prefix: str = "0x") -> Callable[[View], str]:
    """PCI fields: the text report prints 0x18, the XML 18."""
    return lambda view: text_value(view) if view.xml else prefix + text_value(view)


def active(reason: str) -> Callable[[View], str]:
    return lambda view: "Active" if reason in view.now.reasons else "Not Active"


def mib(amount: Callable[[View], int]) -> Callable[[View], str]:
    return lambda view: f"{amount(view)} MiB"


def watts(amount: Callable[[View], float]) -> Callable[[View], str]:
    return lambda view: f"{amount(view):.2f} W"


def mhz(amount: Callable[[View], int]) -> Callable[[View], str]:
    return lambda view: f"{amount(view)} MHz"


def _used(view: View) -> int:
    return memory_used_mib(view.gpu, view.load)


def _free(view: View) -> int:
    facts = view.gpu.facts
    return facts.memory_mib - facts.reserved_mib - _used(view) + 1


def _remapped_unc(view: View) -> str:
    return str(1 if view.gpu.remap_pending else 0)


def _ecc_sections() -> tuple:
    def counts(aggregate: bool) -> tuple:
        fields = (
            F("SRAM Correctable", "sram_correctable", "0"),
            F("SRAM Uncorrectable Parity", "sram_uncorrectable_parity", "0"),
            F("SRAM Uncorrectable SEC-DED", "sram_uncorrectable_secded", "0"),
            F("DRAM Correctable", "dram_correctable", "0"),
            F("DRAM Uncorrectable", "dram_uncorrectable", lambda view: str(view.gpu.ecc_uncorrectable)),
        )
        return fields + ((F("SRAM Threshold Exceeded", "sram_threshold_exceeded", "No"),) if aggregate else ())

    return (
        S("Volatile", "volatile", counts(False)),
        S("Aggregate", "aggregate", counts(True)),
        S(
            "Aggregate Uncorrectable SRAM Sources",
            "aggregate_uncorrectable_sram_sources",
            (
                F("SRAM L2", "sram_l2", "0"),
                F("SRAM SM", "sram_sm", "0"),
                F("SRAM Microcontroller", "sram_microcontroller", "0"),
                F("SRAM PCIE", "sram_pcie", "0"),
                F("SRAM Other", "sram_other", "0"),
            ),
        ),
        F("Channel Repair Pending", "channel_repair_pending", "No"),
        F("TPC Repair Pending", "tpc_repair_pending", "No"),
        F("Unrepairable Memory", "unrepairable_memory", "No"),
    )


def _power_limits(module: bool) -> tuple:
    def limit(value: Callable[[View], float]) -> Value:
        return NA if module else watts(value)

    return (
        F(None, "power_state", "P0"),
        F("Average Power Draw", "average_power_draw", NA if module else watts(lambda v: v.now.power_avg_w)),
        F("Instantaneous Power Draw", "instant_power_draw", NA if module else watts(lambda v: v.now.power_w)),
        F("Current Power Limit", "current_power_limit", limit(lambda v: v.now.power_cap_w)),
        F("Requested Power Limit", "requested_power_limit", limit(lambda v: v.now.power_cap_w)),
        F("Default Power Limit", "default_power_limit", limit(lambda v: float(v.gpu.tdp_w))),
        F("Min Power Limit", "min_power_limit", limit(lambda v: float(v.gpu.min_power_limit_w))),
        F("Max Power Limit", "max_power_limit", limit(lambda v: float(v.gpu.tdp_w))),
    )


def _samples(label: str, display: str) -> S:
    return S(
        label,
        None,
        tuple(F(name, None, "Not Found") for name in ("Duration", "Number of Samples", "Max", "Min", "Avg")),
        display=display,
        only="display",
    )


def _power_samples() -> S:
    def sampled(view: View, pick: str) -> str:
        spread = 0.0 if view.load > 0 else 25.0
        value = {"Max": view.now.power_w + spread, "Min": view.now.power_w, "Avg": view.now.power_avg_w}[pick]
        return f"{value:.2f} W"

    return S(
        "Power Samples",
        None,
        (
            F("Duration", None, "2.36 sec"),
            F("Number of Samples", None, "119"),
            F("Max", None, lambda view: sampled(view, "Max")),
            F("Min", None, lambda view: sampled(view, "Min")),
            F("Avg", None, lambda view: sampled(view, "Avg")),
        ),
        display="POWER",
        only="display",
    )


def _supported_clocks(view: View) -> tuple:
    graphics = tuple(
        F(None, "supported_graphics_clock", f"{clock} MHz")
        for clock in range(view.gpu.facts.max_sm_mhz, view.gpu.facts.idle_sm_mhz - 1, -15)
    )
    return tuple(
        S(None, "supported_mem_clock", (F(None, "value", f"{memory} MHz"), *graphics))
        for memory in (view.gpu.facts.memory_mhz, view.gpu.facts.memory_mhz - 1000)
    )


def _link_gen(view: View) -> str:
    return str(view.gpu.link_gen)


def _link_width(view: View) -> str:
    return f"{view.gpu.pcie_width}x"


def _gpu_temp_limit(view: View) -> str:
    return f"{SLOWDOWN_TEMP_C - view.now.temperature_c} C"


LAYOUT: tuple = (
    F("Product Name", "product_name", lambda v: v.gpu.facts.product_name),
    F("Product Brand", "product_brand", "NVIDIA"),
    F("Product Architecture", "product_architecture", lambda v: v.gpu.architecture),
    F("Display Mode", "display_mode", "Requested functionality has been deprecated"),
    F("Display Attached", "display_attached", "No"),
    F("Display Active", "display_active", "Disabled"),
    F("Persistence Mode", "persistence_mode", "Enabled"),
    F("Addressing Mode", "addressing_mode", "None"),
    S("MIG Mode", "mig_mode", (F("Current", "current_mig", "Disabled"), F("Pending", "pending_mig", "Disabled"))),
    Block("mig_devices", "None"),
    F("Accounting Mode", "accounting_mode", "Disabled"),
    F("Accounting Mode Buffer Size", "accounting_mode_buffer_size", "4000"),
    S("Driver Model", "driver_model", (F("Current", "current_dm", NA), F("Pending", "pending_dm", NA))),
    F("Serial Number", "serial", lambda v: v.gpu.serial),
    F("GPU UUID", "uuid", lambda v: v.gpu.uuid),
    F("GPU PDI", "pdi", lambda v: f"0x{abs(hash_text(v.gpu.uuid)):016x}"),
    F("Minor Number", "minor_number", lambda v: str(v.gpu.index)),
    F("VBIOS Version", "vbios_version", lambda v: v.gpu.vbios),
    F("MultiGPU Board", "multigpu_board", "No"),
    F("Board ID", "board_id", lambda v: f"0x{int(v.gpu.bus, 16) << 8:x}"),
    F("Board Part Number", "board_part_number", lambda v: v.gpu.facts.board_part),
    F("GPU Part Number", "gpu_part_number", lambda v: v.gpu.facts.gpu_part),
    F("FRU Part Number", "gpu_fru_part_number", NA),
    S(
        "Platform Info",
        "platformInfo",
        (
            F("Chassis Serial Number", "chassis_serial_number", NA),
            F("Slot Number", "slot_number", NA),
            F("Tray Index", "tray_index", NA),
            F("Host ID", "host_id", NA),
            F("Peer Type", "peer_type", NA),
            F("Module Id", "module_id", lambda v: str(v.gpu.index + 1)),
            F("GPU Fabric GUID", "gpu_fabric_guid", NA),
        ),
    ),
    S(
        "Inforom Version",
        "inforom_version",
        (
            F("Image Version", "img_version", lambda v: v.gpu.facts.inforom),
            F("OEM Object", "oem_object", "2.1"),
            F("ECC Object", "ecc_object", "7.16"),
            F("Power Management Object", "pwr_object", NA),
        ),
    ),
    S(
        "Inforom BBX Object Flush",
        "inforom_bbx_flush",
        (F("Latest Timestamp", "latest_timestamp", NA), F("Latest Duration", "latest_duration", NA)),
    ),
    S("GPU Operation Mode", "gpu_operation_mode", (F("Current", "current_gom", NA), F("Pending", "pending_gom", NA))),
    F("GPU C2C Mode", "c2c_mode", "Disabled"),
    S(
        "GPU Virtualization Mode",
        "gpu_virtualization_mode",
        (
            F("Virtualization Mode", "virtualization_mode", "None"),
            F("Host VGPU Mode", "host_vgpu_mode", NA),
            F("vGPU Heterogeneous Mode", "vgpu_heterogeneous_mode", NA),
        ),
    ),
    F("GPU Recovery Action", "gpu_recovery_action", lambda v: "GPU Reset" if v.gpu.remap_pending else "None"),
    F("GSP Firmware Version", "gsp_firmware_version", lambda v: v.driver),
    S("IBMNPU", "ibmnpu", (F("Relaxed Ordering Mode", "relaxed_ordering_mode", NA),)),
    S(
        "PCI",
        "pci",
        (
            F("Bus", "pci_bus", hexed(lambda v: v.gpu.bus)),
            F("Device", "pci_device", hexed(lambda v: "00")),
            F("Domain", "pci_domain", hexed(lambda v: "0000")),
            F("Base Classcode", "pci_base_class", hexed(lambda v: "3")),
            F("Sub Classcode", "pci_sub_class", hexed(lambda v: "2")),
            F("Device Id", "pci_device_id", hexed(lambda v: v.gpu.facts.device_id)),
            F("Bus Id", "pci_bus_id", lambda v: v.gpu.pci_bus_id),
            F("Sub System Id", "pci_sub_system_id", hexed(lambda v: v.gpu.facts.subsystem_id)),
            S(
                "GPU Link Info",
                "pci_gpu_link_info",
                (
                    S(
                        "PCIe Generation",
                        "pcie_gen",
                        (
                            F("Max", "max_link_gen", lambda v: str(v.gpu.pcie_gen_max)),
                            F("Current", "current_link_gen", _link_gen),
                            F("Device Current", "device_current_link_gen", _link_gen),
                            F("Device Max", "max_device_link_gen", lambda v: str(v.gpu.pcie_gen_max)),
                            F("Host Max", "max_host_link_gen", lambda v: str(v.gpu.pcie_gen_max)),
                        ),
                    ),
                    S(
                        "Link Width",
                        "link_widths",
                        (F("Max", "max_link_width", "16x"), F("Current", "current_link_width", _link_width)),
                    ),
                ),
            ),
            S(
                "Bridge Chip",
                "pci_bridge_chip",
                (F("Type", "bridge_chip_type", NA), F("Firmware", "bridge_chip_fw", NA)),
            ),
            F("Replays Since Reset", "replay_counter", "0"),
            F("Replay Number Rollovers", "replay_rollover_counter", "0"),
            F("Tx Throughput", "tx_util", lambda v: "7168 KB/s" if v.load > 0 else "0 KB/s"),
            F("Rx Throughput", "rx_util", lambda v: "14336 KB/s" if v.load > 0 else "0 KB/s"),
            F("Atomic Caps Outbound", "atomic_caps_outbound", NA),
            F("Atomic Caps Inbound", "atomic_caps_inbound", NA),
        ),
    ),
    F("Fan Speed", "fan_speed", NA),
    S(None, None, (F("Performance State", "performance_state", "P0"),), display="PERFORMANCE"),
    S(
        "Clocks Event Reasons",
        "clocks_event_reasons",
        (
            F("Idle", "clocks_event_reason_gpu_idle", active("gpu_idle")),
            F(
                "Applications Clocks Setting",
                "clocks_event_reason_applications_clocks_setting",
                active("applications_clocks_setting"),
            ),
            F("SW Power Cap", "clocks_event_reason_sw_power_cap", active("sw_power_cap")),
            F("HW Slowdown", "clocks_event_reason_hw_slowdown", active("hw_slowdown")),
            F("HW Thermal Slowdown", "clocks_event_reason_hw_thermal_slowdown", active("hw_thermal_slowdown"), 1),
            F(
                "HW Power Brake Slowdown",
                "clocks_event_reason_hw_power_brake_slowdown",
                active("hw_power_brake_slowdown"),
                1,
            ),
            F("Sync Boost", "clocks_event_reason_sync_boost", active("sync_boost")),
            F("SW Thermal Slowdown", "clocks_event_reason_sw_thermal_slowdown", active("sw_thermal_slowdown")),
            F("Display Clock Setting", "clocks_event_reason_display_clocks_setting", active("display_clock_setting")),
        ),
        display="PERFORMANCE",
    ),
    S(
        "Clocks Event Reasons Counters",
        "clocks_event_reasons_counters",
        (
            F("SW Power Capping", "clocks_event_reasons_counters_sw_power_cap", "0 us"),
            F("Sync Boost", "clocks_event_reasons_counters_sync_boost", "0 us"),
            F("SW Thermal Slowdown", "clocks_event_reasons_counters_sw_therm_slowdown", "0 us"),
            F("HW Thermal Slowdown", "clocks_event_reasons_counters_hw_therm_slowdown", "0 us"),
            F("HW Power Braking", "clocks_event_reasons_counters_hw_power_brake", "0 us"),
        ),
        display="PERFORMANCE",
    ),
    S(None, None, (F("Sparse Operation Mode", "sparse_operation_mode", "Disabled"),), display="PERFORMANCE"),
    S(
        "FB Memory Usage",
        "fb_memory_usage",
        (
            F("Total", "total", mib(lambda v: v.gpu.facts.memory_mib)),
            F("Reserved", "reserved", mib(lambda v: v.gpu.facts.reserved_mib)),
            F("Used", "used", mib(_used)),
            F("Free", "free", mib(_free)),
        ),
        display="MEMORY",
    ),
    S(
        "BAR1 Memory Usage",
        "bar1_memory_usage",
        (
            F("Total", "total", "262144 MiB"),
            F("Used", "used", lambda v: "1012 MiB" if v.load > 0 else "1 MiB"),
            F("Free", "free", lambda v: "261132 MiB" if v.load > 0 else "262143 MiB"),
        ),
        display="MEMORY",
    ),
    S(
        "Conf Compute Protected Memory Usage",
        "cc_protected_memory_usage",
        (F("Total", "total", "0 MiB"), F("Used", "used", "0 MiB"), F("Free", "free", "0 MiB")),
        display="MEMORY",
    ),
    S(None, None, (F("Compute Mode", "compute_mode", "Default"),), display="COMPUTE"),
    S(
        "Utilization",
        "utilization",
        (
            F("GPU", "gpu_util", lambda v: f"{v.now.util_gpu} %"),
            F("Memory", "memory_util", lambda v: f"{v.now.util_mem} %"),
            F("Encoder", "encoder_util", "0 %"),
            F("Decoder", "decoder_util", "0 %"),
            F("JPEG", "jpeg_util", "0 %"),
            F("OFA", "ofa_util", "0 %"),
        ),
        display="UTILIZATION",
    ),
    S(
        "Encoder Stats",
        "encoder_stats",
        (
            F("Active Sessions", "session_count", "0"),
            F("Average FPS", "average_fps", "0"),
            F("Average Latency", "average_latency", "0"),
        ),
        display="ENCODER_STATS",
    ),
    S(
        "FBC Stats",
        "fbc_stats",
        (
            F("Active Sessions", "session_count", "0"),
            F("Average FPS", "average_fps", "0"),
            F("Average Latency", "average_latency", "0"),
        ),
        display="FBC_STATS",
    ),
    S(
        "DRAM Encryption Mode",
        "dram_encryption_mode",
        (F("Current", "current_dram_encryption", NA), F("Pending", "pending_dram_encryption", NA)),
    ),
    S("ECC Mode", "ecc_mode", (F("Current", "current_ecc", "Enabled"), F("Pending", "pending_ecc", "Enabled")), "ECC"),
    S("ECC Errors", "ecc_errors", _ecc_sections(), display="ECC"),
    S(
        "Retired Pages",
        "retired_pages",
        (
            F("Single Bit ECC", None, NA),
            F("Double Bit ECC", None, NA),
            F("Pending Page Blacklist", None, NA),
            S(None, "multiple_single_bit_retirement", (F(None, "retired_count", NA), F(None, "retired_pagelist", NA))),
            S(None, "double_bit_retirement", (F(None, "retired_count", NA), F(None, "retired_pagelist", NA))),
            F(None, "pending_blacklist", NA),
            F(None, "pending_retirement", NA),
        ),
        display="PAGE_RETIREMENT",
    ),
    S(
        "Remapped Rows",
        "remapped_rows",
        (
            F("Correctable Error", "remapped_row_corr", "0"),
            F("Inactive Correctable Error", "remapped_row_corr_inactive", "0"),
            F("Uncorrectable Error", "remapped_row_unc", _remapped_unc),
            F("Inactive Uncorrectable Error", "remapped_row_unc_inactive", "0"),
            F("Pending", "remapped_row_pending", lambda v: "Yes" if v.gpu.remap_pending else "No"),
            F("Remapping Failure Occurred", "remapped_row_failure", lambda v: "Yes" if v.gpu.remap_failed else "No"),
            S(
                "Bank Remap Availability Histogram",
                "row_remapper_histogram",
                (
                    F(
                        "Max",
                        "row_remapper_histogram_max",
                        lambda v: "3071 bank(s)" if v.gpu.remap_pending else "3072 bank(s)",
                    ),
                    F(
                        "High",
                        "row_remapper_histogram_high",
                        lambda v: "1 bank(s)" if v.gpu.remap_pending else "0 bank(s)",
                    ),
                    F("Partial", "row_remapper_histogram_partial", "0 bank(s)"),
                    F("Low", "row_remapper_histogram_low", "0 bank(s)"),
                    F("None", "row_remapper_histogram_none", "0 bank(s)"),
                ),
            ),
        ),
        display="ROW_REMAPPER",
    ),
    S(
        "Temperature",
        "temperature",
        (
            F("GPU Current Temp", "gpu_temp", lambda v: f"{v.now.temperature_c} C"),
            F("GPU T.Limit Temp", "gpu_temp_tlimit", _gpu_temp_limit),
            F("GPU Shutdown T.Limit Temp", "gpu_temp_max_tlimit_threshold", "-8 C"),
            F("GPU Slowdown T.Limit Temp", "gpu_temp_slow_tlimit_threshold", "-2 C"),
            F("GPU Max Operating T.Limit Temp", "gpu_temp_max_gpu_tlimit_threshold", "0 C"),
            F("GPU Target Temperature", "gpu_target_temperature", NA),
            F("Memory Current Temp", "memory_temp", lambda v: f"{v.now.memory_temperature_c} C"),
            F("Memory Max Operating T.Limit Temp", "gpu_temp_max_mem_tlimit_threshold", "0 C"),
        ),
        display="TEMPERATURE",
    ),
    S(
        None,
        "supported_gpu_target_temp",
        (F(None, "gpu_target_temp_min", NA), F(None, "gpu_target_temp_max", NA)),
        display="SUPPORTED_GPU_TARGET_TEMP",
    ),
    S("GPU Power Readings", "gpu_power_readings", _power_limits(False), display="POWER"),
    _power_samples(),
    S(
        "GPU Memory Power Readings ",
        "gpu_memory_power_readings",
        (
            F("Average Power Draw", "average_power_draw", lambda v: f"{41.2 + 25 * v.load:.2f} W"),
            F("Instantaneous Power Draw", "instant_power_draw", NA),
        ),
        display="POWER",
    ),
    S("Module Power Readings", "module_power_readings", _power_limits(True), display="POWER"),
    S(None, None, (F("Power Smoothing", "power_smoothing", NA),), display="POWER_SMOOTHING"),
    S(
        "Workload Power Profiles",
        "power_profiles",
        (
            F("Requested Profiles", "power_profile_requested_profiles", NA),
            F("Enforced Profiles", "power_profile_enforced_profiles", NA),
        ),
        display="POWER_PROFILES",
    ),
    S(
        "Clocks",
        "clocks",
        (
            F("Graphics", "graphics_clock", mhz(lambda v: v.now.sm_mhz)),
            F("SM", "sm_clock", mhz(lambda v: v.now.sm_mhz)),
            F("Memory", "mem_clock", mhz(lambda v: v.now.mem_mhz)),
            F("Video", "video_clock", lambda v: "1365 MHz" if v.load > 0 else "765 MHz"),
        ),
        display="CLOCK",
    ),
    S(
        "Applications Clocks",
        "applications_clocks",
        (
            F("Graphics", "graphics_clock", mhz(lambda v: v.gpu.clock_cap_mhz or v.gpu.facts.max_sm_mhz)),
            F("Memory", "mem_clock", mhz(lambda v: v.gpu.facts.memory_mhz)),
        ),
        display="CLOCK",
    ),
    S(
        "Default Applications Clocks",
        "default_applications_clocks",
        (
            F("Graphics", "graphics_clock", mhz(lambda v: v.gpu.facts.max_sm_mhz)),
            F("Memory", "mem_clock", mhz(lambda v: v.gpu.facts.memory_mhz)),
        ),
        display="CLOCK",
    ),
    S("Deferred Clocks", "deferred_clocks", (F("Memory", "mem_clock", NA),), display="CLOCK"),
    S(
        "Max Clocks",
        "max_clocks",
        (
            F("Graphics", "graphics_clock", mhz(lambda v: v.gpu.facts.max_sm_mhz)),
            F("SM", "sm_clock", mhz(lambda v: v.gpu.facts.max_sm_mhz)),
            F("Memory", "mem_clock", mhz(lambda v: v.gpu.facts.memory_mhz)),
            F("Video", "video_clock", mhz(lambda v: v.gpu.facts.video_max_mhz)),
        ),
        display="CLOCK",
    ),
    S(
        "Max Customer Boost Clocks",
        "max_customer_boost_clocks",
        (F("Graphics", "graphics_clock", mhz(lambda v: v.gpu.facts.max_sm_mhz)),),
        display="CLOCK",
    ),
    _samples("SM Clock Samples", "CLOCK"),
    _samples("Memory Clock Samples", "CLOCK"),
    S(
        "Clock Policy",
        "clock_policy",
        (F("Auto Boost", "auto_boost", NA), F("Auto Boost Default", "auto_boost_default", NA)),
        display="CLOCK",
    ),
    S(
        "Fabric",
        "fabric",
        (
            F("State", "state", fabric("Completed")),
            F("Status", "status", fabric("Success")),
            F("CliqueId", "cliqueId", fabric(lambda gpu: str(gpu.fabric_clique_id))),
            F("ClusterUUID", "clusterUuid", fabric(lambda gpu: gpu.fabric_cluster_uuid)),
            S(
                "Health",
                "health",
                (
                    F("Summary", "summary", fabric(lambda gpu: "Unhealthy" if gpu.nvlinks_down else "Healthy")),
                    F("Bandwidth", "bandwidth", fabric(lambda gpu: "Degraded" if gpu.nvlinks_down else "Full")),
                    F("Route Recovery in progress", "route_recovery_in_progress", fabric("False")),
                    F("Route Unhealthy", "route_unhealthy", fabric("False")),
                    F("Access Timeout Recovery", "access_timeout_recovery", fabric("False")),
                    F("Incorrect Configuration", "incorrect_configuration", fabric("None")),
                    F("Partition Assigned", "partition_assigned", fabric("True")),
                ),
            ),
        ),
    ),
    S(None, "supported_clocks", (), display="SUPPORTED_CLOCKS"),  # filled per GPU: see _children
    F("Processes", None, "None"),
    Block("processes"),
    Block("accounted_processes"),
    S("Capabilities", "capabilities", (F("EGM", "egm", "disabled"),)),
)

DISPLAYS = {
    "MEMORY",
    "UTILIZATION",
    "ECC",
    "TEMPERATURE",
    "POWER",
    "CLOCK",
    "COMPUTE",
    "PIDS",
    "PERFORMANCE",
    "SUPPORTED_CLOCKS",
    "PAGE_RETIREMENT",
    "ACCOUNTING",
    "ENCODER_STATS",
    "SUPPORTED_GPU_TARGET_TEMP",
    "VOLTAGE",
    "FBC_STATS",
    "ROW_REMAPPER",
    "RESET_STATUS",
    "GSP_FIRMWARE_VERSION",
    "POWER_SMOOTHING",
    "POWER_PROFILES",
}


def hash_text(text: str) -> int:
    return (zlib.crc32(text.encode()) << 32) | zlib.crc32(text[::-1].encode())


def _value(item: F, view: View) -> str:
    return item.value(view) if callable(item.value) else item.value


def _children(section: S, view: View) -> tuple:
    return _supported_clocks(view) if section.tag == "supported_clocks" else section.children


def _keep(item, displays: set[str] | None) -> bool:
    only = getattr(item, "only", "")
    if displays is None:
        return only != "display"
    return isinstance(item, S) and item.display in displays and only != "full"


# --- text -------------------------------------------------------------------------------------------------------


def _text_lines(items, view: View, depth: int) -> list[str]:
    lines = []
    for item in items:
        if isinstance(item, Block):
            continue
        if isinstance(item, S):
            children = _children(item, view)
            if item.label is None:
                lines += _text_lines(children, view, depth)  # a grouping or an XML-only section
            elif item.tag is not None or any(child.label for child in children if not isinstance(child, Block)):
                lines.append("    " * depth + item.label)
                lines += _text_lines(children, view, depth + 1)
        elif item.label is not None:
            key = "    " * (depth + item.nest) + item.label
            lines.append(f"{key:<{LABEL_WIDTH}}: {_value(item, view)}")
    return lines


def render_text(context: Context, gpus: list[tuple[int, SimGpu]], displays: set[str] | None) -> str:
    lines = ["", "==============NVSMI LOG==============", ""]
    lines += [
        f"{'Timestamp':<{LABEL_WIDTH}}: {ctime()}",
        f"{'Driver Version':<{LABEL_WIDTH}}: {context.state.driver_version}",
        f"{'CUDA Version':<{LABEL_WIDTH}}: {context.state.driver_cuda}",
        "",
        f"{'Attached GPUs':<{LABEL_WIDTH}}: {len(context.state.visible_gpus)}",
    ]
    for index, gpu in gpus:
        view = View(index, gpu, reading(context, gpu), context.load, xml=False, driver=context.state.driver_version)
        lines.append(f"GPU {gpu.pci_bus_id}")
        lines += _text_lines([item for item in LAYOUT if _keep(item, displays)], view, 1)
        lines.append("")
    return "\n".join(lines) + "\n"


# --- XML --------------------------------------------------------------------------------------------------------


def _xml_lines(items, view: View, depth: int) -> list[str]:
    pad = "\t" * depth
    lines = []
    for item in items:
        if isinstance(item, Block):
            lines.append(f"{pad}<{item.tag}>")
            if item.text:
                lines.append(f"{pad}\t{item.text}")
            lines.append(f"{pad}</{item.tag}>")
        elif isinstance(item, S):
            children = _children(item, view)
            if item.tag is None:
                lines += _xml_lines(children, view, depth)
            else:
                lines.append(f"{pad}<{item.tag}>")
                lines += _xml_lines(children, view, depth + 1)
                lines.append(f"{pad}</{item.tag}>")
        elif item.tag is not None:
            lines.append(f"{pad}<{item.tag}>{escape(_value(item, view))}</{item.tag}>")
    return lines


def render_xml(context: Context, gpus: list[tuple[int, SimGpu]], displays: set[str] | None) -> str:
    lines = [
        '<?xml version="1.0" ?>',
        '<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v13.dtd">',
        "<nvidia_smi_log>",
        f"\t<timestamp>{ctime()}</timestamp>",
        f"\t<driver_version>{context.state.driver_version}</driver_version>",
        f"\t<cuda_version>{context.state.driver_cuda}</cuda_version>",
        f"\t<attached_gpus>{len(context.state.visible_gpus)}</attached_gpus>",
    ]
    for index, gpu in gpus:
        view = View(index, gpu, reading(context, gpu), context.load, xml=True, driver=context.state.driver_version)
        lines.append(f'\t<gpu id="{gpu.pci_bus_id}">')
        lines += _xml_lines([item for item in LAYOUT if _keep(item, displays)], view, 2)
        lines += ["\t</gpu>", ""]
    lines.append("</nvidia_smi_log>")
    return "\n".join(lines) + "\n"


def render(context: Context, gpus: list[tuple[int, SimGpu]], *, displays: str | None, xml: bool) -> CommandOutput:
    selected = None
    if displays:
        selected = {name.strip().upper() for name in displays.split(",")}
        if not selected <= DISPLAYS:
            return CommandOutput(2, "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n\n")
    renderer = render_xml if xml else render_text
    return ok(renderer(context, gpus, selected))
