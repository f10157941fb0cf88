"""Redfish Thermal and Power resources from iDRAC and iLO."""

from apps.parsers.redfish import parse_redfish

from .helpers import assert_parse_error, data, real


def test_dell_power_consumed_watts_and_supply():
    report = parse_redfish(real("redfish/telegraf-dell_power.json"))

    assert report.resource == "Power"
    assert (report.consumed_watts, report.average_consumed_watts, report.max_consumed_watts) == (429, 426, 436)
    assert (report.capacity_watts, report.power_limit_watts) == (1628, 348)
    [supply] = report.power_supplies
    assert (supply.name, supply.capacity_watts, supply.line_input_voltage, supply.health) == (
        "PS1 Status",
        750,
        206,
        "OK",
    )
    assert supply.model == "PWR SPLY,750W,RDNT,ARTESYN"
    assert len(report.voltages) == 3 and report.voltages[0].unit == "V"


def test_dell_thermal_fans_and_temperatures():
    report = parse_redfish(real("redfish/telegraf-dell_thermal.json"))

    assert report.resource == "Thermal"
    [cpu] = report.temperatures
    assert (cpu.name, cpu.reading, cpu.unit, cpu.upper_critical) == ("CPU1 Temp", 40, "C", 93)
    assert len(report.fans) == 16
    assert (report.fans[0].name, report.fans[0].reading, report.fans[0].unit) == ("System Board Fan1A", 17760, "RPM")


def test_hpe_ilo_thermal_and_power():
    thermal = parse_redfish(real("redfish/telegraf-hp_thermal.json"))
    power = parse_redfish(real("redfish/telegraf-hp_power.json"))

    assert [(t.name, t.reading) for t in thermal.temperatures][0] == ("01-Inlet Ambient", 19)
    assert thermal.fans[0].unit == "Percent"
    assert power.consumed_watts == 221 and power.capacity_watts == 1600
    assert [supply.capacity_watts for supply in power.power_supplies] == [800, 800]


def test_not_a_thermal_or_power_resource_is_rejected():
    assert_parse_error(parse_redfish, "", 1, "empty input")
    assert_parse_error(parse_redfish, '{"@odata.type": "#Chassis.v1_10_0.Chassis", "Id": "1"}', 1, "#Chassis")
    assert_parse_error(parse_redfish, "[1, 2]", 1, "JSON object")
    assert_parse_error(parse_redfish, '{\n"Fans": [\n', 3, "Redfish")


def test_environment_metrics_power_energy_fans():
    report = parse_redfish(data("redfish-environment-metrics-invented.json"))

    assert report.resource == "EnvironmentMetrics"
    assert (report.consumed_watts, report.energy_kwh, report.power_limit_watts) == (6890.4, 18123.6, 10200)
    assert [(fan.name, fan.reading, fan.unit) for fan in report.fans] == [
        ("Fan 1", 7360, "RPM"),
        ("Fan 2", 47.0, "Percent"),
    ]
    assert [sensor.reading for sensor in report.temperatures] == [24.5]


def test_thermal_metrics_temperatures():
    report = parse_redfish(data("redfish-thermal-metrics-invented.json"))

    assert report.resource == "ThermalMetrics"
    assert [(sensor.name, sensor.reading) for sensor in report.temperatures] == [("Intake", 24.8), ("Exhaust", 41.2)]


def test_a_coolant_connector_and_a_leak_detector_read_as_figures_and_states():
    from apps.parsers.redfish import parse_coolant_connector, parse_leak_detector

    connector = parse_coolant_connector(
        '{"@odata.type": "#CoolantConnector.v1_0_0.CoolantConnector", "Name": "Tray coolant connector",'
        ' "FlowLitersPerMinute": {"Reading": 4.41}, "SupplyTemperatureCelsius": {"Reading": 30.1},'
        ' "ReturnTemperatureCelsius": {"Reading": 41.7}, "DeltaPressurekPa": {"Reading": 59.2},'
        ' "Status": {"Health": "OK"}}'
    )
    assert (connector.flow_lpm, connector.supply_c, connector.return_c, connector.delta_pressure_kpa) == (
        4.41,
        30.1,
        41.7,
        59.2,
    )
    detector = parse_leak_detector(
        '{"@odata.type": "#LeakDetector.v1_0_0.LeakDetector", "Name": "Tray drip pan leak detector",'
        ' "DetectorState": "Critical", "Status": {"Health": "Critical"}}'
    )
    assert (detector.name, detector.leaking) == ("Tray drip pan leak detector", True)
    assert not parse_leak_detector('{"DetectorState": "OK"}').leaking
    assert_parse_error(parse_leak_detector, '{"Name": "Thermal"}', 1, "LeakDetector")
