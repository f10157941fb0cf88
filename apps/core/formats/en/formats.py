"""The one date and time format of every page: a bare {{ when }}, |date and |time print as the tables do
(2026-12-05 11:50), not Django's English default ("Dec. 5, 2026, 11:50 a.m.") beside them (issue 27, walk 11).
Settings FORMAT_MODULE_PATH points here; the API keeps ISO 8601."""

DATE_FORMAT = "Y-m-d"
TIME_FORMAT = "H:i"
DATETIME_FORMAT = "Y-m-d H:i"
SHORT_DATE_FORMAT = "Y-m-d"
SHORT_DATETIME_FORMAT = "Y-m-d H:i"
MONTH_DAY_FORMAT = "m-d"
YEAR_MONTH_FORMAT = "Y-m"
