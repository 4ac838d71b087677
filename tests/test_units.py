"""One GiB and one GiB formatter (cookbook.units): the plan, the pages and fetch print sizes alike."""

from cookbook.units import GIB, gib


def test_gib_prints_two_decimals_with_separators_and_aligns_on_request():
    assert GIB == 1 << 30
    assert gib(1234.5 * GIB) == "1,234.50 GiB"
    assert gib(0) == "0.00 GiB"
    assert gib(3 * GIB, 10) == "      3.00 GiB" == f"{3:10,.2f} GiB"
    assert gib(12345678 * GIB, 10) == "12,345,678.00 GiB"  # wider than the column: never cut
