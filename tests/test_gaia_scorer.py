"""GAIA's official quasi-exact match (numbers, lists, strings) — no LLM anywhere."""

import pytest

from porchestra.envs.gaia.scorer import question_scorer


@pytest.mark.parametrize("answer, truth, expected", [
    # numbers: only $, % and , are stripped; other units make the answer a non-number
    ("49000", "49000", True), ("49,000", "49000", True), ("$1,000", "1000", True), ("50%", "50", True),
    ("1000.0", "1000", True), ("49001", "49000", False), ("17 km", "17", False), ("seventeen", "17", False),
    # lists: split on , or ;, same length, element-wise, order matters
    ("Abbott, Nguyen, Okafor", "Abbott, Nguyen, Okafor", True),
    ("abbott,nguyen,okafor", "Abbott, Nguyen, Okafor", True),
    ("Abbott; Nguyen; Okafor", "Abbott, Nguyen, Okafor", True),
    ("Nguyen, Abbott, Okafor", "Abbott, Nguyen, Okafor", False),
    ("Abbott, Okafor", "Abbott, Nguyen, Okafor", False),
    ("1, 2.0, $3", "1,2,3", True), ("1, 2, 4", "1,2,3", False),
    ("Abbott., Nguyen, Okafor", "Abbott, Nguyen, Okafor", False),  # list elements keep punctuation
    # strings: whitespace and punctuation removed, case-insensitive
    ("Marisol.", "Marisol", True), ("  marisol ", "Marisol", True), ("Saint-Malo", "Saint Malo", True),
    ("The Marisol", "Marisol", False), ("St. Petersburg", "Saint Petersburg", False),
    (None, "Marisol", False), ("", "Marisol", False),
])
def test_question_scorer(answer, truth, expected):
    assert question_scorer(answer, truth) is expected
