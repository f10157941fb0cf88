"""The stylesheet keeps what a label says: table headings are not upper-cased, which turned the units of a label
("Port speed (Gb/s)") into another unit ("PORT SPEED (GB/S)": gigabytes, eight times as much)."""

import re
from pathlib import Path

STYLESHEET = Path(__file__).resolve().parents[2] / "static" / "css" / "rackpilot.css"


def test_table_headings_keep_the_case_of_their_units():
    css = STYLESHEET.read_text()
    rules = re.findall(r"(?m)^([^{}\n]*\bth\b[^{}\n]*)\{([^}]*)\}", css)
    assert rules, "no rule for table headings found"
    upper = [selector.strip() for selector, body in rules if "uppercase" in body]
    assert upper == [], f"headings upper-cased by: {upper}"
