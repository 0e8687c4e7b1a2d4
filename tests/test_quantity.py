import pytest

from olarespack.core import quantity


@pytest.mark.parametrize(
    ("text", "millicores"),
    [
        ("4", 4000),
        ("1500m", 1500),
        ("0.5", 500),
        ("0.25", 250),
        (".5", 500),
        ("5.", 5000),
        ("+1", 1000),
        ("1e3", 10**6),
        ("1E-3", 1),
        ("100n", 1),
        ("1u", 1),
        ("2.5", 2500),
    ],
)
def test_parse_cpu(text: str, millicores: int) -> None:
    assert quantity.parse_cpu(text) == millicores


@pytest.mark.parametrize(
    ("text", "amount"),
    [
        ("24Gi", 24 * 2**30),
        ("512Mi", 512 * 2**20),
        ("1G", 10**9),
        ("1073741824", 2**30),
        ("1.5Gi", 3 * 2**29),
        ("2.5Gi", 5 * 2**29),
        ("6.5Gi", 13 * 2**29),
        ("0.1Ki", 103),
        ("1e9", 10**9),
        ("1Ei", 2**60),
        ("9E", 9 * 10**18),
        ("500m", 1),
    ],
)
def test_parse_bytes(text: str, amount: int) -> None:
    assert quantity.parse_bytes(text) == amount


@pytest.mark.parametrize(
    "text",
    ["4 cores", "-1", "24GB", "", ".", "1.5.5", "1e", "e3", "1Ki5", "1ki", "1K", "8Ei", "1e100", "0x10", "1_000", "Gi"],
)
def test_rejects_bad_quantities(text: str) -> None:
    with pytest.raises(ValueError):
        quantity.parse_bytes(text)


def test_canonical_formatting_round_trips() -> None:
    assert quantity.format_cpu(4000) == "4"
    assert quantity.format_cpu(2100) == "2100m"
    assert quantity.format_bytes(24 * 2**30) == "24Gi"
    assert quantity.format_bytes(4224 * 2**20) == "4224Mi"
    assert quantity.format_bytes(1000) == "1000"
    assert quantity.mib(24400 * 2**20) == 24400


@pytest.mark.parametrize(
    ("text", "accepted"),
    [
        ("1K", True),
        ("1Pi", True),
        ("Gi", True),
        ("2.5Gi", True),
        (".5", False),
        ("+1", False),
        ("1n", False),
        ("-1", False),
    ],
)
def test_the_manifest_pattern_is_olares_own(text: str, accepted: bool) -> None:
    assert bool(quantity.MANIFEST_QUANTITY.match(text)) is accepted
