"""ipmitool sdr, sdr elist and sensor listings."""

from apps.parsers.ipmi import parse_dcmi_power, parse_ipmitool

from .helpers import assert_parse_error, real


def test_sdr_three_columns_with_units():
    readings = parse_ipmitool(real("ipmi/ipmitool-sdr-v1-ibm-systemx-telegraf-fixture.txt"))

    assert readings.format == "sdr"
    sensors = {sensor.name: sensor for sensor in readings.sensors}
    assert (sensors["Ambient Temp"].value, sensors["Ambient Temp"].unit) == (20.0, "C")
    assert (sensors["Avg Power"].value, sensors["Avg Power"].unit) == (210.0, "W")
    assert (sensors["Planar 12V"].value, sensors["Planar 12V"].unit) == (12.04, "V")
    assert (sensors["Fan 1A Tach"].value, sensors["Fan 1A Tach"].unit) == (2610.0, "RPM")
    assert sensors["Fan 1"].value is None and sensors["Fan 1"].reading == "0x00"  # discrete
    assert all(sensor.status for sensor in readings.sensors)


def test_sdr_percent_and_watts():
    readings = parse_ipmitool(real("ipmi/ipmitool-sdr-hp-dl380-g7-partial-collectd-819.txt"))

    assert [sensor.value for sensor in readings.by_unit("W")] == [35.0, 155.0]
    assert readings.by_unit("%")[0].value == 43.51


def test_sdr_elist_columns():
    readings = parse_ipmitool(real("ipmi/ipmitool-sdr-elist-all-dell-idrac-partial-dell-fan-controller-36.txt"))

    assert readings.format == "sdr_elist"
    ambient = next(sensor for sensor in readings.sensors if sensor.status == "ok" and sensor.unit == "C")
    assert (ambient.name, ambient.sensor_id, ambient.entity, ambient.value) == ("Ambient Temp", "0Eh", "7.1", 19.0)
    assert readings.sensors[0].status == "ns" and readings.sensors[0].value is None
    battery = next(sensor for sensor in readings.sensors if sensor.name == "CMOS Battery")
    assert battery.reading is None


def test_sensor_ten_columns_with_thresholds():
    readings = parse_ipmitool(real("ipmi/ipmitool-sensor-hpe-dl360p-g8-partial-pve-mods-93.txt"))

    assert readings.format == "sensor"
    inlet = readings.sensors[2]
    assert (inlet.name, inlet.value, inlet.unit, inlet.status) == ("01-Inlet Ambient", 32.0, "C", "ok")
    assert inlet.thresholds["upper_non_critical"] == 40.0 and inlet.thresholds["upper_critical"] == 42.0
    assert inlet.thresholds["lower_critical"] is None
    assert readings.sensors[0].value is None  # 'UID Light' is discrete


def test_not_ipmitool_output_is_rejected():
    assert_parse_error(parse_ipmitool, "", 1, "empty input")
    assert_parse_error(parse_ipmitool, real("h200-1gpu/lscpu.txt"), 1, "3, 5 or 10 columns")
    mixed = "Fan 1 | 40 percent | ok\nFan 2 | 40 percent\n"
    assert_parse_error(parse_ipmitool, mixed, 2, "expected 3 '|'-separated columns, got 2")


def test_dcmi_power_reading_ipmitool_activated():
    reading = parse_dcmi_power(
        real("ipmi-dcmi/ipmitool-dcmi-power-reading-activated-leading-blank-line-rabe-zabbix-issue101.txt")
    )

    assert (reading.current_watts, reading.minimum_watts, reading.maximum_watts) == (197.0, 175.0, 242.0)
    assert reading.average_watts == 190.0 and reading.active and reading.sampling_seconds == 123893.0


def test_dcmi_power_reading_deactivated_is_not_active():
    reading = parse_dcmi_power(
        real(
            "ipmi-dcmi/ipmitool-dcmi-power-reading-deactivated-all-zero-epoch-timestamp-openbmc-phosphor-host-ipmid-issue167.txt"
        )
    )

    assert reading.current_watts == 0.0 and not reading.active


def test_dcmi_power_statistics_freeipmi():
    reading = parse_dcmi_power(
        real(
            "ipmi-dcmi/freeipmi-ipmi-dcmi-get-system-power-statistics-gpu-node-busy-1190w-nordichpc-sonar-issue215.txt"
        )
    )

    assert (reading.current_watts, reading.average_watts, reading.active) == (1190.0, 1189.0, True)
    assert reading.sampling_seconds == 688.0


def test_dcmi_refusal_is_a_parse_error():
    assert_parse_error(parse_dcmi_power, "Error: DCMI is not supported\n", 1, "DCMI power reading")
