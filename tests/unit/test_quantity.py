from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kubernetes.utils.quantity import parse_quantity as kubernetes_parse_quantity

from reconciler.compile.quantity import QuantityError, parse_quantity

SUFFIXES = ["", "m", "k", "M", "G", "T", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]


@given(
    st.decimals(min_value=0, max_value=10**6, places=3, allow_nan=False, allow_infinity=False),
    st.sampled_from(SUFFIXES),
)
def test_agrees_with_the_kubernetes_client(number: Decimal, suffix: str) -> None:
    text = f"{number}{suffix}"
    assert parse_quantity(text) == kubernetes_parse_quantity(text)


@pytest.mark.parametrize("value", ["", "Gi", "16GB", "1.2.3", "ten"])
def test_rejects_what_kubernetes_rejects(value: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(value)
    with pytest.raises(ValueError):
        kubernetes_parse_quantity(value)


def test_inner_space_is_rejected_as_the_api_server_does() -> None:
    # The Python client's parser lets "16 Gi" through; the API server does not.
    with pytest.raises(QuantityError):
        parse_quantity("16 Gi")


def test_numbers_from_yaml() -> None:
    assert parse_quantity(8) == 8
    assert parse_quantity(0.5) == Decimal("0.5")
    with pytest.raises(QuantityError):
        parse_quantity(True)
