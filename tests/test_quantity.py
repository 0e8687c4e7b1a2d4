import pytest

from olarespack import quantity


@pytest.mark.parametrize(("text", "millicores"), [("4", 4000), ("1500m", 1500), ("0.5", 500), ("0.25", 250)])
def test_parse_cpu(text: str, millicores: int) -> None:
    assert quantity.parse_cpu(text) == millicores


@pytest.mark.parametrize(("text", "amount"), [("24Gi", 24 * 2**30), ("512Mi", 512 * 2**20), ("1G", 10**9),
                                              ("1073741824", 2**30)])
def test_parse_bytes(text: str, amount: int) -> None:
    assert quantity.parse_bytes(text) == amount


@pytest.mark.parametrize("text", ["4 cores", "-1", "1.5Gi", "24GB", ""])
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
