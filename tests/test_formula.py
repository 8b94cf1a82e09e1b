"""Closed forms as data (tilefit.formula): the grammar's checks, and the compiled function's values."""

from __future__ import annotations

import pytest

from tilefit.formula import FormulaError, compile_formula

VARS = ("S", "W", "BM", "BN", "BK", "a", "b")


@pytest.mark.parametrize("text, words", [
    ("BM.real", "Attribute is not allowed"),
    ("BM + X", "unknown name 'X'"),
    ("max(BM, key=BN)", "only max, min, ceil, floor, pow2ceil may be called"),
    ("(BM)(BN)", "only max, min, ceil, floor, pow2ceil may be called"),
    ("BM + 'a'", "only numbers are allowed as constants"),
    ("[BM][0]", "Subscript is not allowed"),
    ("lambda: 1", "Lambda is not allowed"),
    ("BM +", "formula 'BM +': invalid syntax"),
    ("BM.real + X", "Attribute is not allowed"),  # breadth first: the attribute before the name below it
    ("X + BM.real", "unknown name 'X'"),  # ... and a name beside it, left first
    ("max(BM)[0] + Y", "Subscript is not allowed"),
])
def test_what_the_grammar_refuses(text, words):
    with pytest.raises(FormulaError) as err:
        compile_formula(text, VARS)
    assert words in str(err.value)


def test_a_form_takes_its_variables_by_name_or_in_their_order():
    text = "max(S - 1, 1) * (BM*BK*a + BK*BN*b) if W >= 4 else pow2ceil(BM * 1.5) // 2  # the ring"
    fn = compile_formula(text, VARS)
    values = dict(S=3, W=4, BM=64, BN=128, BK=32, a=2, b=1)
    assert fn(**values) == fn(*values.values()) == 2 * (64 * 32 * 2 + 32 * 128)
    assert fn(**dict(values, W=2)) == 64 and fn(**dict(values, W=2, BM=100)) == 128
