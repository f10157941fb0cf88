"""find -printf '%s %A@ %p\\n' and lsof -F pcfn, read from output captured on a real machine."""

from pathlib import Path

import pytest

from apps.parsers.errors import ParseError
from apps.parsers.files import parse_find_printf, parse_lsof_fields

DATA = Path(__file__).parent / "data"


def test_find_printf_gives_size_access_time_and_the_path_with_its_spaces_and_metacharacters():
    listing = parse_find_printf((DATA / "find-printf-atime-real.txt").read_text())

    assert [(found.path, found.size_bytes) for found in listing.files] == [("/tmp/tier-real/a b/x $(y); 'z'.bin", 3)]
    assert listing.files[0].atime == pytest.approx(1795291033.4858918)
    assert listing.total_bytes == 3


def test_find_printf_refuses_a_line_it_cannot_read_and_reads_nothing_as_no_files():
    assert parse_find_printf("").files == []
    with pytest.raises(ParseError) as error:
        parse_find_printf("12 1700000000.5 /a\nnot a find line\n")
    assert error.value.line == 2


def test_lsof_fields_give_each_open_file_with_its_process():
    found = parse_lsof_fields((DATA / "lsof-F-pcfn-real.txt").read_text())

    assert [(f.pid, f.command, f.descriptor, f.path) for f in found.files] == [
        (17550, "python3", "3", "/tmp/tier-real/a b/open.dat")
    ]
    assert found.paths == {"/tmp/tier-real/a b/open.dat"}


def test_lsof_fields_refuse_a_file_before_any_process():
    assert parse_lsof_fields("").files == []
    with pytest.raises(ParseError):
        parse_lsof_fields("n/tmp/x\n")
    with pytest.raises(ParseError):
        parse_lsof_fields("pabc\n")
