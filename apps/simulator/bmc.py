"""A simulated node's BMC: what `ipmitool ... sdr` and `dcmi power reading` print, and the Redfish documents
(service root, sessions, Chassis Thermal / Power / EnvironmentMetrics), in the real formats of
tests/fixtures/real/ipmi, ipmi-dcmi and redfish.

The figures come from the node's model at a moment: GPU power from the simulator's power model under the load,
the chassis' power from GPUs + CPUs + the rest of the board (a rack-scale system's compute tray: its Grace CPUs and
the tray's own figure, TRAY_BOARD_W), exhaust temperature from power and airflow, fan speed from the hottest GPU.
Faults move them as on a real node: a GPU in thermal slowdown runs hot and spins the fans up, a GPU fallen off the bus
has no reading and draws nothing, a straggler draws less. Noise is seeded per node, sensor and 10-second window, so a
window read twice gives the same figures.

The chassis power and the System Event Log (apps/simulator/sel.py) are the node's stored state: `chassis power` and
the Redfish ComputerSystem.Reset action change it (off: the node answers nothing), `sel elist` and the SEL
LogService's Entries read it.

One account, RACKPILOT_SIM_BMC_USER / RACKPILOT_SIM_BMC_PASSWORD; any other login is refused the way the real
protocols refuse it.
"""

import json
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime

from django.conf import settings

from apps.simulator import services
from apps.simulator.model import gpu_reading, noise
from apps.simulator.sel import SelRecord
from apps.simulator.services import node_state
from apps.simulator.state import SimulatedNode
from apps.simulator.tools.common import ctime

WINDOW_SECONDS = 10  # the BMC's sensors refresh this often; readings within a window are identical
AMBIENT_C = 22.0  # cold-aisle air
BOARD_POWER_W = 520.0  # NVSwitches, NICs, drives, memory and the fans' own floor
CPU_IDLE_W, CPU_BUSY_W = 95.0, 300.0  # per socket
AIR_J_PER_M3_K = 1.2 * 1005  # density × heat capacity of air
MAX_AIRFLOW_M3_S = 0.75  # an 8-GPU chassis' fans flat out (~1,600 CFM)
FAN_MAX_RPM = 16800
FAN_COUNT = 8
PSU_COUNT = 4
PSU_CAPACITY_W = 3300

# A rack-scale system's compute tray (a node of an NVLink domain: a GB200 NVL72's two Grace CPUs and four GPUs on cold
# plates) is no HGX host: no NVSwitch on its board (they are in the switch trays), no x86 sockets, and fans only for
# what is not on a cold plate. Its figures at full load, from public ones:
# - a Grace with its LPDDR5X: 250 W (the Grace CPU Superchip datasheet: 500 W for two, memory included); idle, a third
#   of it as for the x86 sockets (the model's, not a datasheet's);
# - four 400G ConnectX-7 at ~25 W, each with its 400G OSFP module at 9 W (NVIDIA's MMA4Z00-NS400 specification);
# - two BlueField-3 DPUs at their 150 W maximum (NVIDIA's BlueField-3 user manual);
# - four E1.S NVMe drives at ~20 W (the reference tray's four bays);
# - 100 W for the rest: the tray's BMC, its fans, converting the busbar's 48 V for the board (an allowance).
# The inventory's full-load estimate counts the same (apps/inventory/power.py TRAY_PLATFORM_W; a test keeps them equal).
GRACE_IDLE_W, GRACE_BUSY_W = 80.0, 250.0  # per Grace
TRAY_BOARD_W = 4 * (25 + 9) + 2 * 150 + 4 * 20 + 100.0  # 616 W

# What ipmitool prints when the BMC refuses the login: the same line as for a BMC that never answers; only with -v
# does it say why first (as ipmitool 1.8.19 against OpenIPMI's ipmi_sim does).
IPMI_REFUSED = "Error: Unable to establish IPMI v2 / RMCP+ session\n"
IPMI_REFUSED_VERBOSE = "RAKP 2 HMAC is invalid\n"


# A liquid-cooled tray: coolant (water-glycol, ~65 W per K for each l/min) enters at the CDU's supply temperature and
# carries the GPUs' and CPUs' heat away; less flow, a hotter return.
COOLANT_SUPPLY_C = 30.0
COOLANT_W_PER_K_LPM = 65.0
TRAY_PRESSURE_DROP_KPA = 60.0  # across a tray's cold plates at design flow; it falls with the square of the flow


@dataclass(frozen=True)
class CoolantFigures:
    """A liquid-cooled tray's coolant inlet and leak detector."""

    flow_lpm: float
    supply_c: float
    return_c: float
    delta_pressure_kpa: float
    leak: bool
    design_flow_lpm: float
    max_return_c: float


@dataclass(frozen=True)
class BmcFigures:
    """One node's sensors at one moment."""

    inlet_c: float
    exhaust_c: float
    cpu_c: list[float | None]  # None: no reading (the host is off)
    gpu_c: list[tuple[int, float | None]]  # (inventory index, °C); None: no reading (the GPU is gone, the host off)
    fan_rpm: list[float | None]  # None: no reading (the host is off: its fans stand still)
    power_w: float
    psu_w: list[float]
    power_cap_w: float
    coolant: CoolantFigures | None = None  # a liquid-cooled tray of a rack-scale system; None on an air-cooled node
    powered_on: bool = True  # off: only the BMC's standby sensors read (no CPU, GPU or fan reading, 0 W)


def figures(state: SimulatedNode, *, seed: int, load: float, at: datetime) -> BmcFigures:
    window = int(at.timestamp()) // WINDOW_SECONDS
    rng = noise(seed, state.hostname, "bmc", window)
    if state.powered_off:
        return _standby(state, seed=seed, rng=rng)
    load = max(0.0, min(load, 1.0))
    gpu_power = 0.0
    gpu_temperatures: list[tuple[int, float | None]] = []
    for gpu in state.gpus:
        if not gpu.present:
            gpu_temperatures.append((gpu.index, None))
            continue
        reading = gpu_reading(gpu, load=load, rng=noise(seed, state.hostname, "gpu", gpu.index, window))
        gpu_power += reading.power_w
        gpu_temperatures.append((gpu.index, float(reading.temperature_c)))
    sockets = max(state.sockets, 1)
    tray = state.domain is not None
    idle_w, busy_w = (GRACE_IDLE_W, GRACE_BUSY_W) if tray else (CPU_IDLE_W, CPU_BUSY_W)
    cpu_share = load * (0.7 if state.straggler else 1.0)
    cpu_power = sockets * (idle_w + (busy_w - idle_w) * cpu_share)
    hottest = max((value for _, value in gpu_temperatures if value is not None), default=40.0)
    # The fan curve: 30% duty up to 45 °C on the hottest GPU, full speed from 85 °C.
    duty = min(1.0, max(0.3, 0.3 + (hottest - 45.0) / 40.0 * 0.7))
    fan_power = FAN_COUNT * 25.0 * duty**3  # fan power grows with the cube of speed
    # A compute tray's fans are in its board's figure: most of its heat leaves in the coolant.
    power = TRAY_BOARD_W + cpu_power + gpu_power if tray else BOARD_POWER_W + cpu_power + gpu_power + fan_power
    inlet = AMBIENT_C + noise(seed, state.hostname, "inlet").uniform(-1.5, 1.5) + rng.uniform(-0.2, 0.2)
    exhaust = inlet + power / (AIR_J_PER_M3_K * MAX_AIRFLOW_M3_S * duty)
    cpu_temperatures = [inlet + 14.0 + 0.11 * cpu_power / sockets + rng.uniform(-1, 1) for _ in range(sockets)]
    fans = [FAN_MAX_RPM * duty * (1 + rng.uniform(-0.015, 0.015)) for _ in range(FAN_COUNT)]
    psus = [power / PSU_COUNT * (1 + rng.uniform(-0.03, 0.03)) for _ in range(PSU_COUNT)]
    return BmcFigures(
        inlet_c=round(inlet),
        exhaust_c=round(exhaust),
        cpu_c=[round(value) for value in cpu_temperatures],
        gpu_c=[(index, None if value is None else round(value)) for index, value in gpu_temperatures],
        fan_rpm=[round(value / 120) * 120 for value in fans],  # tachometers count in steps of the sensor's M factor
        power_w=round(power),
        psu_w=[round(value) for value in psus],
        power_cap_w=float(PSU_CAPACITY_W * (PSU_COUNT - 1)),  # N+1 redundant supplies
        coolant=_coolant(state, gpu_power + cpu_power, rng),
    )


def _standby(state: SimulatedNode, *, seed: int, rng) -> BmcFigures:
    """A chassis its BMC turned off, as real BMCs read it on standby power: the inlet sensor still reads (exhaust
    at the inlet's temperature: no heat, no airflow), the host's sensors (CPUs, GPUs, fans) have no reading, the
    power is 0 W; a liquid-cooled tray's coolant still flows (the rack's CDU pumps it) and returns at the supply's
    temperature, and its leak detector still reads."""
    inlet = round(AMBIENT_C + noise(seed, state.hostname, "inlet").uniform(-1.5, 1.5) + rng.uniform(-0.2, 0.2))
    return BmcFigures(
        inlet_c=inlet,
        exhaust_c=inlet,
        cpu_c=[None] * max(state.sockets, 1),
        gpu_c=[(gpu.index, None) for gpu in state.gpus],
        fan_rpm=[None] * FAN_COUNT,
        power_w=0,
        psu_w=[0] * PSU_COUNT,
        power_cap_w=float(PSU_CAPACITY_W * (PSU_COUNT - 1)),
        coolant=_coolant(state, 0.0, rng),
        powered_on=False,
    )


def _coolant(state: SimulatedNode, heat_w: float, rng) -> CoolantFigures | None:
    design = state.domain.tray_design_flow_lpm if state.domain else None
    if not design:
        return None
    flow = design * state.coolant_flow_pct / 100 * (1 + rng.uniform(-0.01, 0.01))
    supply = COOLANT_SUPPLY_C + rng.uniform(-0.2, 0.2)
    rise = heat_w / (COOLANT_W_PER_K_LPM * max(flow, 0.1))
    return CoolantFigures(
        flow_lpm=round(flow, 2),
        supply_c=round(supply, 1),
        return_c=round(supply + rise, 1),
        delta_pressure_kpa=round(TRAY_PRESSURE_DROP_KPA * (flow / design) ** 2, 1),
        leak=state.leak_detected,
        design_flow_lpm=round(design, 2),
        max_return_c=state.domain.max_return_c,
    )


# --- IPMI ---------------------------------------------------------------------------------------------------------


def _sdr_line(name: str, reading: str, status: str) -> str:
    return f"{name:<16} | {reading:<17} | {status}\n"


def _sdr_sensor(name: str, value: float | None, unit: str) -> str:
    """A sensor line; one without a reading (a GPU gone, a host off) as ipmitool prints it: `no reading | ns`."""
    return _sdr_line(name, "no reading", "ns") if value is None else _sdr_line(name, f"{value:g} {unit}", "ok")


def sdr(values: BmcFigures) -> str:
    """`ipmitool sdr`: name | reading | status, as in ipmitool-sdr-v1-ibm-systemx-telegraf-fixture.txt."""
    lines = [_sdr_line("Inlet Temp", f"{values.inlet_c:g} degrees C", "ok")]
    lines.append(_sdr_line("Exhaust Temp", f"{values.exhaust_c:g} degrees C", "ok"))
    lines += [_sdr_sensor(f"CPU{n} Temp", value, "degrees C") for n, value in enumerate(values.cpu_c, 1)]
    lines += [_sdr_sensor(f"GPU{index + 1} Temp", value, "degrees C") for index, value in values.gpu_c]
    lines += [_sdr_sensor(f"FAN{n}", value, "RPM") for n, value in enumerate(values.fan_rpm, 1)]
    lines += [_sdr_line(f"PSU{n} Input", f"{value:g} Watts", "ok") for n, value in enumerate(values.psu_w, 1)]
    lines.append(_sdr_line("Total Power", f"{values.power_w:g} Watts", "ok"))
    return "".join(lines)


def dcmi_power_reading(values: BmcFigures, *, at: datetime) -> str:
    """`ipmitool dcmi power reading`, with ipmitool's own leading blank line and column layout."""
    power = int(values.power_w)
    return (
        "\n"
        f"    Instantaneous power reading:              {power:8d} Watts\n"
        f"    Minimum during sampling period:           {int(power * 0.93):8d} Watts\n"
        f"    Maximum during sampling period:           {int(power * 1.04):8d} Watts\n"
        f"    Average power reading over sample period: {int(power * 0.99):8d} Watts\n"
        f"    IPMI timestamp:                           {ctime(at)}\n"
        f"    Sampling period:                          {WINDOW_SECONDS:08d} Seconds.\n"
        "    Power reading state is:                   activated\n"
        "\n"
    )


def logged_in(user: str, password: str) -> bool:
    expected_user, expected_password = settings.RACKPILOT_SIM_BMC_USER, settings.RACKPILOT_SIM_BMC_PASSWORD
    return secrets.compare_digest(user, expected_user) and secrets.compare_digest(password, expected_password)


# What `ipmitool chassis power <verb>` prints once the BMC took the request (ipmitool's ipmi_chassis.c).
CHASSIS_CONTROL = {"on": "Up/On", "off": "Down/Off", "cycle": "Cycle", "reset": "Reset"}


@dataclass(frozen=True)
class BmcState:
    """The chassis power and the SEL of one node, read when a power or SEL request asks for them."""

    powered_on: bool
    sel: list[SelRecord]


def bmc_state(node) -> BmcState:
    return BmcState(services.power_is_on(node), services.sel_records(node))


def chassis_control(node, action: str, *, seed: int = 0) -> None:
    """The chassis control an IPMI `chassis power` command or a Redfish Reset asked for (apps.simulator.services)."""
    services.bmc_power(node=node, action=action, seed=seed)


def sel_elist(state: BmcState) -> str:
    """`ipmitool sel elist`: record id in hex (%4x), the BMC's date and time (UTC), sensor, event, direction."""
    lines = []
    for record in state.sel:
        moment = datetime.fromtimestamp(record.at, tz=UTC)
        direction = "Asserted" if record.asserted else "Deasserted"
        lines.append(
            f"{record.record_id:4x} | {moment:%m/%d/%Y} | {moment:%H:%M:%S} | {record.sensor_type} {record.sensor} | "
            f"{record.event} | {direction}\n"
        )
    return "".join(lines) or "SEL has no entries\n"


def ipmitool(
    values: BmcFigures | None, argv: list[str], *, password: str, at: datetime, state: BmcState | None = None
) -> tuple[int, str, str]:
    """What ipmitool prints for a lanplus command to this BMC: -U user, the password from IPMI_PASSWORD (-E).
    `state` answers `chassis power …` and `sel elist` (the caller carries out a power verb on the node first)."""
    user = argv[argv.index("-U") + 1] if "-U" in argv and argv.index("-U") + 1 < len(argv) else ""
    if not logged_in(user, password):
        return 1, "", (IPMI_REFUSED_VERBOSE if "-v" in argv else "") + IPMI_REFUSED
    tail = argv[-3:]
    if state is not None and tail[:2] == ["chassis", "power"]:
        if tail[2] == "status":
            return 0, f"Chassis Power is {'on' if state.powered_on else 'off'}\n", ""
        if tail[2] in CHASSIS_CONTROL:
            return 0, f"Chassis Power Control: {CHASSIS_CONTROL[tail[2]]}\n", ""
    if state is not None and argv[-2:] == ["sel", "elist"]:
        return 0, sel_elist(state), ""
    if argv[-1:] == ["sdr"]:
        return 0, sdr(values), ""
    if tail == ["dcmi", "power", "reading"]:
        return 0, dcmi_power_reading(values, at=at), ""
    return 1, "", f"Invalid command: {' '.join(argv[-2:])}\n"


# --- Redfish ------------------------------------------------------------------------------------------------------

CHASSIS = "/redfish/v1/Chassis/1"


def _health(value: float, critical: float) -> str:
    return "OK" if value < critical else "Critical"


def _temperature(member: int, name: str, value: float, context: str, critical: float) -> dict:
    return {
        "@odata.id": f"{CHASSIS}/Thermal#/Temperatures/{member}",
        "MemberId": str(member),
        "Name": name,
        "PhysicalContext": context,
        "ReadingCelsius": value,
        "UpperThresholdCritical": critical,
        "UpperThresholdFatal": critical + 5,
        "Status": {"Health": _health(value, critical), "State": "Enabled"},
    }


def thermal(values: BmcFigures) -> dict:
    """The Chassis' Thermal resource (Redfish 2016.1-2020.3), shaped as telegraf-dell_thermal.json."""
    temperatures = [
        _temperature(0, "Inlet Temp", values.inlet_c, "Intake", 42),
        _temperature(1, "Exhaust Temp", values.exhaust_c, "Exhaust", 75),
    ]
    # A sensor of a host that is off has no reading and is "UnavailableOffline" (Redfish's Resource.State); a GPU
    # gone from a host that is on is "Absent" and Critical.
    offline = {"Health": "OK", "State": "UnavailableOffline"}
    for number, value in enumerate(values.cpu_c, 1):
        entry = _temperature(len(temperatures), f"CPU{number} Temp", value or 0, "CPU", 95)
        if value is None:
            entry |= {"ReadingCelsius": None, "Status": offline}
        temperatures.append(entry)
    for index, value in values.gpu_c:
        entry = _temperature(len(temperatures), f"GPU{index + 1} Temp", value or 0, "GPU", 87)
        if value is None:
            gone = {"Health": "Critical", "State": "Absent"}
            entry |= {"ReadingCelsius": None, "Status": gone if values.powered_on else offline}
        temperatures.append(entry)
    fans = [
        {
            "@odata.id": f"{CHASSIS}/Thermal#/Fans/{member}",
            "MemberId": str(member),
            "Name": f"FAN{member + 1}",
            "PhysicalContext": "SystemBoard",
            "Reading": value,
            "ReadingUnits": "RPM",
            "LowerThresholdCritical": 1200,
            "Status": {"Health": "OK", "State": "Enabled"} if value is not None else offline,
        }
        for member, value in enumerate(values.fan_rpm)
    ]
    return {
        "@odata.context": "/redfish/v1/$metadata#Thermal.Thermal",
        "@odata.id": f"{CHASSIS}/Thermal",
        "@odata.type": "#Thermal.v1_4_0.Thermal",
        "Id": "Thermal",
        "Name": "Thermal",
        "Temperatures": temperatures,
        "Temperatures@odata.count": len(temperatures),
        "Fans": fans,
        "Fans@odata.count": len(fans),
    }


def power(values: BmcFigures) -> dict:
    """The Chassis' Power resource, shaped as telegraf-dell_power.json."""
    supplies = [
        {
            "@odata.id": f"{CHASSIS}/Power/PowerSupplies/{number}",
            "MemberId": str(number),
            "Name": f"PSU{number + 1}",
            "Model": "CRPS 3300W Titanium",
            "PowerCapacityWatts": PSU_CAPACITY_W,
            "LastPowerOutputWatts": value,
            "LineInputVoltage": 230,
            "Status": {"Health": "OK", "State": "Enabled"},
        }
        for number, value in enumerate(values.psu_w)
    ]
    return {
        "@odata.context": "/redfish/v1/$metadata#Power.Power",
        "@odata.id": f"{CHASSIS}/Power",
        "@odata.type": "#Power.v1_5_0.Power",
        "Id": "Power",
        "Name": "Power",
        "PowerControl": [
            {
                "@odata.id": f"{CHASSIS}/Power#/PowerControl/0",
                "MemberId": "0",
                "Name": "System Power Control",
                "PowerConsumedWatts": values.power_w,
                "PowerCapacityWatts": values.power_cap_w,
                "PowerMetrics": {
                    "IntervalInMin": 1,
                    "AverageConsumedWatts": round(values.power_w * 0.99),
                    "MaxConsumedWatts": round(values.power_w * 1.04),
                    "MinConsumedWatts": round(values.power_w * 0.93),
                },
            }
        ],
        "PowerControl@odata.count": 1,
        "PowerSupplies": supplies,
        "PowerSupplies@odata.count": len(supplies),
    }


def environment_metrics(values: BmcFigures) -> dict:
    """The Chassis' EnvironmentMetrics (Redfish 2020.4+): power, intake temperature, fan speeds."""
    return {
        "@odata.id": f"{CHASSIS}/EnvironmentMetrics",
        "@odata.type": "#EnvironmentMetrics.v1_3_0.EnvironmentMetrics",
        "Id": "EnvironmentMetrics",
        "Name": "Chassis Environment Metrics",
        "TemperatureCelsius": {"DataSourceUri": f"{CHASSIS}/Sensors/InletTemp", "Reading": values.inlet_c},
        "PowerWatts": {"DataSourceUri": f"{CHASSIS}/Sensors/TotalPower", "Reading": values.power_w},
        "PowerLimitWatts": {"SetPoint": values.power_cap_w, "ControlMode": "Disabled"},
        "FanSpeedsPercent": [
            {
                "DataSourceUri": f"{CHASSIS}/Sensors/Fan{number + 1}",
                "DeviceName": f"FAN{number + 1}",
                "Reading": None if value is None else round(value / FAN_MAX_RPM * 100, 1),
                "SpeedRPM": value,
            }
            for number, value in enumerate(values.fan_rpm)
        ],
    }


# --- Redfish ThermalSubsystem of a liquid-cooled tray (DMTF 2023.2: CoolantConnector, LeakDetection, LeakDetector) ---

THERMAL_SUBSYSTEM = f"{CHASSIS}/ThermalSubsystem"
LEAK_DETECTOR = f"{THERMAL_SUBSYSTEM}/LeakDetection/LeakDetectors/Tray"
COOLANT_INLET = f"{THERMAL_SUBSYSTEM}/CoolantConnectors/Inlet"


def _status(ok: bool, bad: str = "Critical") -> dict:
    return {"State": "Enabled", "Health": "OK" if ok else bad}


def thermal_subsystem(values: BmcFigures) -> dict:
    coolant = values.coolant
    return {
        "@odata.id": THERMAL_SUBSYSTEM,
        "@odata.type": "#ThermalSubsystem.v1_3_0.ThermalSubsystem",
        "Id": "ThermalSubsystem",
        "Name": "Thermal Subsystem",
        "CoolantConnectors": {"@odata.id": f"{THERMAL_SUBSYSTEM}/CoolantConnectors"},
        "LeakDetection": {"@odata.id": f"{THERMAL_SUBSYSTEM}/LeakDetection"},
        "Status": _status(not coolant.leak),
    }


def leak_detection(leak: bool) -> dict:
    return {
        "@odata.id": f"{THERMAL_SUBSYSTEM}/LeakDetection",
        "@odata.type": "#LeakDetection.v1_0_0.LeakDetection",
        "Id": "LeakDetection",
        "Name": "Leak Detection",
        "LeakDetectors": {"@odata.id": f"{THERMAL_SUBSYSTEM}/LeakDetection/LeakDetectors"},
        "Status": _status(not leak),
    }


def leak_detector(leak: bool) -> dict:
    state = "Critical" if leak else "OK"
    return {
        "@odata.id": LEAK_DETECTOR,
        "@odata.type": "#LeakDetector.v1_0_0.LeakDetector",
        "Id": "Tray",
        "Name": "Tray drip pan leak detector",
        "LeakDetectorType": "Moisture",
        "DetectorState": state,
        "Status": _status(state == "OK"),
    }


def coolant_inlet(values: BmcFigures) -> dict:
    coolant = values.coolant
    low = coolant.flow_lpm < coolant.design_flow_lpm * 0.8
    return {
        "@odata.id": COOLANT_INLET,
        "@odata.type": "#CoolantConnector.v1_0_0.CoolantConnector",
        "Id": "Inlet",
        "Name": "Tray coolant connector",
        "CoolantConnectorType": "Pair",
        "FlowLitersPerMinute": {"DataSourceUri": f"{CHASSIS}/Sensors/CoolantFlow", "Reading": coolant.flow_lpm},
        "SupplyTemperatureCelsius": {"DataSourceUri": f"{CHASSIS}/Sensors/SupplyTemp", "Reading": coolant.supply_c},
        "ReturnTemperatureCelsius": {"DataSourceUri": f"{CHASSIS}/Sensors/ReturnTemp", "Reading": coolant.return_c},
        "DeltaPressurekPa": {"DataSourceUri": f"{CHASSIS}/Sensors/CoolantDP", "Reading": coolant.delta_pressure_kpa},
        "Status": _status(not low and coolant.return_c <= coolant.max_return_c, "Warning"),
    }


def coolant_connectors(values: BmcFigures) -> dict:
    return {
        "@odata.id": f"{THERMAL_SUBSYSTEM}/CoolantConnectors",
        "@odata.type": "#CoolantConnectorCollection.CoolantConnectorCollection",
        "Name": "Coolant Connector Collection",
        "Members": [{"@odata.id": COOLANT_INLET}],
        "Members@odata.count": 1,
    }


def leak_detectors() -> dict:
    return {
        "@odata.id": f"{THERMAL_SUBSYSTEM}/LeakDetection/LeakDetectors",
        "@odata.type": "#LeakDetectorCollection.LeakDetectorCollection",
        "Name": "Leak Detector Collection",
        "Members": [{"@odata.id": LEAK_DETECTOR}],
        "Members@odata.count": 1,
    }


# --- Redfish: the ComputerSystem (power, Reset), its SEL LogService -----------------------------------------------

SYSTEMS = "/redfish/v1/Systems"
SYSTEM = f"{SYSTEMS}/1"
RESET_TARGET = f"{SYSTEM}/Actions/ComputerSystem.Reset"
LOG_SERVICES = f"{SYSTEM}/LogServices"
SEL_SERVICE = f"{LOG_SERVICES}/SEL"
SEL_ENTRIES = f"{SEL_SERVICE}/Entries"
# The ResetType values this BMC takes and what each does to the chassis.
RESET_TYPES = {
    "On": "on",
    "ForceOff": "off",
    "GracefulShutdown": "off",
    "ForceRestart": "reset",
    "GracefulRestart": "reset",
    "PowerCycle": "cycle",
}
# Redfish's SensorType names for ipmitool's sensor types (DMTF Sensor / LogEntry SensorType enum).
REDFISH_SENSOR_TYPES = {"Power Supply": "Power Supply / Converter"}


def system(state: BmcState) -> dict:
    return {
        "@odata.id": SYSTEM,
        "@odata.type": "#ComputerSystem.v1_20_0.ComputerSystem",
        "Id": "1",
        "Name": "HGX H200 8-GPU",
        "SystemType": "Physical",
        "PowerState": "On" if state.powered_on else "Off",
        "LogServices": {"@odata.id": LOG_SERVICES},
        "Actions": {
            "#ComputerSystem.Reset": {
                "target": RESET_TARGET,
                "ResetType@Redfish.AllowableValues": list(RESET_TYPES),
            }
        },
    }


def sel_entry(record: SelRecord) -> dict:
    moment = datetime.fromtimestamp(record.at, tz=UTC)
    direction = "Asserted" if record.asserted else "Deasserted"
    return {
        "@odata.id": f"{SEL_ENTRIES}/{record.record_id}",
        "@odata.type": "#LogEntry.v1_15_0.LogEntry",
        "Id": str(record.record_id),
        "Name": f"Log Entry {record.record_id}",
        "EntryType": "SEL",
        "Created": moment.isoformat(timespec="seconds"),
        "Severity": record.severity,
        "Message": f"{record.sensor_type} {record.sensor} {record.event} {direction}",
        "SensorType": REDFISH_SENSOR_TYPES.get(record.sensor_type, record.sensor_type),
        "SensorNumber": record.record_id % 256,
        "EntryCode": "Assert" if record.asserted else "Deassert",
    }


def system_documents(state: BmcState) -> dict:
    entries = [sel_entry(record) for record in state.sel]
    return {
        SYSTEMS: {
            "@odata.id": SYSTEMS,
            "@odata.type": "#ComputerSystemCollection.ComputerSystemCollection",
            "Name": "Computer System Collection",
            "Members": [{"@odata.id": SYSTEM}],
            "Members@odata.count": 1,
        },
        SYSTEM: system(state),
        LOG_SERVICES: {
            "@odata.id": LOG_SERVICES,
            "@odata.type": "#LogServiceCollection.LogServiceCollection",
            "Name": "System Log Services",
            "Members": [{"@odata.id": SEL_SERVICE}],
            "Members@odata.count": 1,
        },
        SEL_SERVICE: {
            "@odata.id": SEL_SERVICE,
            "@odata.type": "#LogService.v1_4_0.LogService",
            "Id": "SEL",
            "Name": "IPMI SEL",
            "LogEntryType": "SEL",
            "OverWritePolicy": "WrapsWhenFull",
            "Entries": {"@odata.id": SEL_ENTRIES},
        },
        SEL_ENTRIES: {
            "@odata.id": SEL_ENTRIES,
            "@odata.type": "#LogEntryCollection.LogEntryCollection",
            "Name": "System Event Log Entries",
            "Members": entries,
            "Members@odata.count": len(entries),
        },
    }


SERVICE_ROOT = {
    "@odata.id": "/redfish/v1/",
    "@odata.type": "#ServiceRoot.v1_11_0.ServiceRoot",
    "Id": "RootService",
    "Name": "Root Service",
    "RedfishVersion": "1.15.0",
    "Chassis": {"@odata.id": "/redfish/v1/Chassis"},
    "Systems": {"@odata.id": SYSTEMS},
    "SessionService": {"@odata.id": "/redfish/v1/SessionService"},
    "Links": {"Sessions": {"@odata.id": "/redfish/v1/SessionService/Sessions"}},
}
CHASSIS_COLLECTION = {
    "@odata.id": "/redfish/v1/Chassis",
    "@odata.type": "#ChassisCollection.ChassisCollection",
    "Name": "Chassis Collection",
    "Members": [{"@odata.id": CHASSIS}],
    "Members@odata.count": 1,
}
CHASSIS_DOCUMENT = {
    "@odata.id": CHASSIS,
    "@odata.type": "#Chassis.v1_21_0.Chassis",
    "Id": "1",
    "Name": "HGX H200 8-GPU",
    "ChassisType": "RackMount",
    "Thermal": {"@odata.id": f"{CHASSIS}/Thermal"},
    "Power": {"@odata.id": f"{CHASSIS}/Power"},
    "EnvironmentMetrics": {"@odata.id": f"{CHASSIS}/EnvironmentMetrics"},
}
SESSIONS = "/redfish/v1/SessionService/Sessions"


def chassis_document(values: BmcFigures | None) -> dict:
    """The chassis, with its PowerState; a liquid-cooled tray's links its ThermalSubsystem (coolant connectors, leak
    detection) too."""
    if values is None:
        return CHASSIS_DOCUMENT
    document = {**CHASSIS_DOCUMENT, "PowerState": "On" if values.powered_on else "Off"}
    if values.coolant is not None:
        document["ThermalSubsystem"] = {"@odata.id": THERMAL_SUBSYSTEM}
    return document


def _error(status: int, message: str, message_id: str) -> tuple[int, dict, bytes]:
    body = {"error": {"code": message_id, "message": message, "@Message.ExtendedInfo": [{"MessageId": message_id}]}}
    return status, {"Content-Type": "application/json"}, json.dumps(body).encode()


def _service(
    method: str, path: str, *, headers: dict, body: bytes | None, tokens: set[str], root: dict
) -> tuple[int, dict, bytes] | None:
    """What every simulated Redfish service answers the same way: its root, a session's creation and deletion, and a
    request without a valid session refused; None for an authorised request of a resource."""
    if method == "GET" and path in ("/redfish/v1", "/redfish"):
        return 200, {"Content-Type": "application/json"}, json.dumps(root).encode()
    if method == "POST" and path == SESSIONS:
        try:
            login = json.loads(body or b"{}")
        except ValueError:
            return _error(400, "The request body is not JSON.", "Base.1.8.MalformedJSON")
        if not logged_in(str(login.get("UserName", "")), str(login.get("Password", ""))):
            return _error(401, "The credentials are not valid.", "Base.1.8.NoValidSession")
        token = secrets.token_hex(16)
        tokens.add(token)
        location = f"{SESSIONS}/{token[:8]}"
        headers_out = {"Content-Type": "application/json", "X-Auth-Token": token, "Location": location}
        return 201, headers_out, json.dumps({"@odata.id": location, "UserName": login["UserName"]}).encode()
    token = headers.get("X-Auth-Token", "")
    if token not in tokens:
        return _error(401, "No valid session was given.", "Base.1.8.NoValidSession")
    if method == "DELETE" and path.startswith(SESSIONS + "/"):
        tokens.discard(token)
        return 204, {}, b""
    return None


def _document(document: dict) -> tuple[int, dict, bytes]:
    return 200, {"Content-Type": "application/json"}, json.dumps(document).encode()


def redfish(
    values_at, method: str, path: str, *, headers: dict, body: bytes | None, tokens: set[str], state_at=None
) -> tuple[int, dict, bytes]:
    """One HTTP request to the BMC's Redfish service: (status, headers, body). `values_at()` gives the figures (read
    only when a sensor document is asked for); `state_at()` the chassis power and SEL (for the System's documents);
    `tokens` holds the sessions this BMC has handed out. A Reset it accepts answers 204: the caller carries it out on
    the node (RESET_TYPES says what it does)."""
    path = path.rstrip("/") or "/"
    answer = _service(method, path, headers=headers, body=body, tokens=tokens, root=SERVICE_ROOT)
    if answer is not None:
        return answer
    documents = {
        "/redfish/v1/Chassis": lambda: CHASSIS_COLLECTION,
        CHASSIS: lambda: chassis_document(values_at()),
        f"{CHASSIS}/Thermal": lambda: thermal(values_at()),
        f"{CHASSIS}/Power": lambda: power(values_at()),
        f"{CHASSIS}/EnvironmentMetrics": lambda: environment_metrics(values_at()),
    }
    liquid = {
        THERMAL_SUBSYSTEM: thermal_subsystem,
        f"{THERMAL_SUBSYSTEM}/LeakDetection": lambda values: leak_detection(values.coolant.leak),
        f"{THERMAL_SUBSYSTEM}/LeakDetection/LeakDetectors": lambda values: leak_detectors(),
        LEAK_DETECTOR: lambda values: leak_detector(values.coolant.leak),
        f"{THERMAL_SUBSYSTEM}/CoolantConnectors": coolant_connectors,
        COOLANT_INLET: coolant_inlet,
    }
    if method == "POST" and path == RESET_TARGET:
        try:
            reset_type = json.loads(body or b"{}").get("ResetType")
        except (ValueError, AttributeError):
            return _error(400, "The request body is not a JSON object.", "Base.1.8.MalformedJSON")
        if reset_type not in RESET_TYPES:
            return _error(400, f"ResetType {reset_type!r} is not allowed.", "Base.1.8.ActionParameterValueNotInList")
        return 204, {}, b""
    if method == "GET" and path.startswith(SYSTEMS) and state_at is not None:
        document = system_documents(state_at()).get(path)
        if document is not None:
            return _document(document)
    if method == "GET" and path in liquid and (values := values_at()).coolant is not None:
        return _document(liquid[path](values))
    if method != "GET" or path not in documents:
        return _missing(path)
    return _document(documents[path]())


def _missing(path: str) -> tuple[int, dict, bytes]:
    return _error(404, f"{path} is not a resource of this service.", "Base.1.8.ResourceMissingAtURI")


# --- an NVLink switch tray's BMC (Redfish only): its temperatures, power and leak detector ---------------------------

SWITCH_CHASSIS_NAME = "NVLink Switch Tray"
SWITCH_BOARD_W = 180.0  # management CPU, BMC, pumps' share, optics' cages
NVSWITCH_IDLE_W, NVSWITCH_BUSY_W = 160.0, 420.0  # per NVSwitch chip (two on an NVL72 switch tray)
NVSWITCH_CHIPS = 2
THERMAL_METRICS = f"{THERMAL_SUBSYSTEM}/ThermalMetrics"


@dataclass(frozen=True)
class SwitchTrayFigures:
    """One NVLink switch tray's sensors at one moment."""

    inlet_c: float
    nvswitch_c: list[float]
    power_w: float
    leak: bool


def switch_tray_figures(tray, *, seed: int, load: float, at: datetime) -> SwitchTrayFigures:
    """The figures of an inventory NvlinkSwitchTray's BMC at `at`: its NVSwitch chips warm and draw with the load
    (all-reduce traffic crosses every switch tray), its leak detector reads the `leak` fault injected on a compute
    tray of its domain with the switch tray's slot as target (apps/simulator/faults/kinds.py)."""
    window = int(at.timestamp()) // WINDOW_SECONDS
    rng = noise(seed, tray.name, "bmc", window)
    load = max(0.0, min(load, 1.0))
    inlet = AMBIENT_C + noise(seed, tray.name, "inlet").uniform(-1.5, 1.5) + rng.uniform(-0.2, 0.2)
    chips = [NVSWITCH_IDLE_W + (NVSWITCH_BUSY_W - NVSWITCH_IDLE_W) * load for _ in range(NVSWITCH_CHIPS)]
    return SwitchTrayFigures(
        inlet_c=round(inlet),
        nvswitch_c=[round(COOLANT_SUPPLY_C + 0.07 * watts + rng.uniform(-1, 1)) for watts in chips],
        power_w=round(SWITCH_BOARD_W + sum(chips) * (1 + rng.uniform(-0.02, 0.02))),
        leak=services.switch_tray_leaking(tray),
    )


SWITCH_SERVICE_ROOT = {key: value for key, value in SERVICE_ROOT.items() if key != "Systems"}  # no host to run


def switch_chassis_document() -> dict:
    return {
        "@odata.id": CHASSIS,
        "@odata.type": "#Chassis.v1_21_0.Chassis",
        "Id": "1",
        "Name": SWITCH_CHASSIS_NAME,
        "ChassisType": "RackMount",
        "PowerState": "On",
        "EnvironmentMetrics": {"@odata.id": f"{CHASSIS}/EnvironmentMetrics"},
        "ThermalSubsystem": {"@odata.id": THERMAL_SUBSYSTEM},
    }


def switch_thermal_subsystem(values: SwitchTrayFigures) -> dict:
    """A switch tray's ThermalSubsystem: its ThermalMetrics and its LeakDetection (no coolant connector sensors)."""
    return {
        "@odata.id": THERMAL_SUBSYSTEM,
        "@odata.type": "#ThermalSubsystem.v1_3_0.ThermalSubsystem",
        "Id": "ThermalSubsystem",
        "Name": "Thermal Subsystem",
        "ThermalMetrics": {"@odata.id": THERMAL_METRICS},
        "LeakDetection": {"@odata.id": f"{THERMAL_SUBSYSTEM}/LeakDetection"},
        "Status": _status(not values.leak),
    }


def switch_thermal_metrics(values: SwitchTrayFigures) -> dict:
    """DMTF ThermalMetrics: the tray's inlet and each NVSwitch chip's temperature."""
    readings = [("Inlet Temp", "Intake", values.inlet_c, "InletTemp")]
    readings += [
        (f"NVSwitch{chip} Temp", "ASIC", value, f"NVSwitch{chip}Temp") for chip, value in enumerate(values.nvswitch_c)
    ]
    return {
        "@odata.id": THERMAL_METRICS,
        "@odata.type": "#ThermalMetrics.v1_0_0.ThermalMetrics",
        "Id": "ThermalMetrics",
        "Name": "Chassis Thermal Metrics",
        "TemperatureReadingsCelsius": [
            {
                "DataSourceUri": f"{CHASSIS}/Sensors/{sensor}",
                "DeviceName": name,
                "PhysicalContext": context,
                "Reading": value,
            }
            for name, context, value, sensor in readings
        ],
    }


def switch_environment_metrics(values: SwitchTrayFigures) -> dict:
    return {
        "@odata.id": f"{CHASSIS}/EnvironmentMetrics",
        "@odata.type": "#EnvironmentMetrics.v1_3_0.EnvironmentMetrics",
        "Id": "EnvironmentMetrics",
        "Name": "Chassis Environment Metrics",
        "PowerWatts": {"DataSourceUri": f"{CHASSIS}/Sensors/TotalPower", "Reading": values.power_w},
    }


def switch_tray_redfish(
    values_at, method: str, path: str, *, headers: dict, body: bytes | None, tokens: set[str]
) -> tuple[int, dict, bytes]:
    """One HTTP request to an NVLink switch tray's Redfish service, as `redfish` answers a node's: one chassis with
    EnvironmentMetrics and a ThermalSubsystem (ThermalMetrics, LeakDetection); no ComputerSystem."""
    path = path.rstrip("/") or "/"
    answer = _service(method, path, headers=headers, body=body, tokens=tokens, root=SWITCH_SERVICE_ROOT)
    if answer is not None:
        return answer
    documents = {
        "/redfish/v1/Chassis": lambda values: CHASSIS_COLLECTION,
        CHASSIS: lambda values: switch_chassis_document(),
        f"{CHASSIS}/EnvironmentMetrics": switch_environment_metrics,
        THERMAL_SUBSYSTEM: switch_thermal_subsystem,
        THERMAL_METRICS: switch_thermal_metrics,
        f"{THERMAL_SUBSYSTEM}/LeakDetection": lambda values: leak_detection(values.leak),
        f"{THERMAL_SUBSYSTEM}/LeakDetection/LeakDetectors": lambda values: leak_detectors(),
        LEAK_DETECTOR: lambda values: leak_detector(values.leak),
    }
    if method != "GET" or path not in documents:
        return _missing(path)
    return _document(documents[path](values_at()))


def node_figures(node, *, seed: int, load: float, at: datetime) -> BmcFigures:
    """The figures of an inventory Node's BMC at `at`, from its state now (inventory, faults, changes)."""
    return figures(node_state(node=node), seed=seed, load=load, at=at)
