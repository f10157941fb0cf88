"""ipmitool's System Event Log (sel elist), chassis power status, and Redfish LogEntry collections."""

import json

from apps.parsers.ipmi import parse_chassis_power, parse_sel_elist
from apps.parsers.redfish import parse_log_entries

from .helpers import assert_parse_error, real

ECC = "ipmi-sel/ipmitool-sel-elist-uncorrectable-ecc-os-critical-stop-partial-argon-hpc-notes.txt"
PSU = "ipmi-sel/ipmitool-sel-elist-psu-failure-detected-partial-argon-hpc-notes.txt"


def test_real_sel_with_an_uncorrectable_ecc_record():
    log = parse_sel_elist(real(ECC))

    assert len(log.entries) == 10
    ecc = log.entries[1]
    assert (ecc.record_id, ecc.timestamp, ecc.sensor_type, ecc.sensor) == (
        0x54,
        "2025-03-11T16:34:51",
        "Memory",
        "#0x08",
    )
    assert (ecc.event, ecc.direction, ecc.line_number) == ("Uncorrectable ECC", "Asserted", 2)
    assert ecc.line == "  54 | 03/11/2025 | 16:34:51 | Memory #0x08 | Uncorrectable ECC | Asserted"
    assert log.entries[-1].record_id == 0x5C  # ids are hexadecimal
    assert log.entries[2].sensor_type == "OS Critical Stop"


def test_real_sel_sensor_types_are_told_apart_longest_first():
    log = parse_sel_elist(real(PSU))

    psu = next(entry for entry in log.entries if entry.event == "Failure detected")
    assert (psu.sensor_type, psu.sensor, psu.record_id) == ("Power Supply", "PSU1 PWR Detect", 0x34)
    assert {entry.sensor_type for entry in log.entries} == {"Fan", "Power Unit", "Power Supply"}
    assert log.entries[0].direction == "Deasserted"


def test_sel_reading_column_pre_init_and_empty_log():
    text = (
        "  3e | 10/02/2025 | 22:07:09 | Temperature Inlet Temp | Upper Non-critical going high | Deasserted | "
        "Reading 28 > Threshold 28 degrees C\n"
        "   1 | Pre-Init  | 0000000000 | Event Logging Disabled #0x07 | Log area reset/cleared | Asserted\n"
    )
    first, second = parse_sel_elist(text).entries

    assert first.detail == "Reading 28 > Threshold 28 degrees C" and first.sensor == "Inlet Temp"
    assert second.timestamp is None and second.sensor_type == "Event Logging Disabled"
    assert parse_sel_elist("SEL has no entries\n").entries == []


def test_not_a_sel_is_rejected_at_its_line():
    assert_parse_error(parse_sel_elist, "", 1, "empty input")
    assert_parse_error(parse_sel_elist, real(ECC) + "Inlet Temp | 24 degrees C | ok\n", 11, "id | date | time")


def test_chassis_power_status():
    assert parse_chassis_power("Chassis Power is on\n") == "on"
    assert parse_chassis_power("Chassis Power is off\n") == "off"
    assert_parse_error(parse_chassis_power, "Chassis Power Control: Cycle\n", 1, "Chassis Power is on")


def test_redfish_log_entries():
    document = {
        "@odata.id": "/redfish/v1/Systems/1/LogServices/SEL/Entries",
        "Members": [
            {
                "Id": "7",
                "Created": "2025-03-11T16:34:51+00:00",
                "Severity": "Critical",
                "Message": "Memory DIMM A3 Uncorrectable ECC Asserted",
                "SensorType": "Memory",
                "EntryCode": "Assert",
                "EntryType": "SEL",
            }
        ],
        "Members@odata.nextLink": "/redfish/v1/Systems/1/LogServices/SEL/Entries?$skip=1",
    }
    log = parse_log_entries(json.dumps(document))

    (entry,) = log.entries
    assert (entry.id, entry.severity, entry.sensor_type, entry.entry_code) == ("7", "Critical", "Memory", "Assert")
    assert log.next_link.endswith("$skip=1")
    assert_parse_error(parse_log_entries, json.dumps({"Temperatures": []}), 1, "LogEntry collection")
