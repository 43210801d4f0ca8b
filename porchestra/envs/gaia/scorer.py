"""GAIA's official quasi-exact match, restated from the leaderboard's scorer semantics.

- ground truth is a number: the answer is stripped of `$`, `%` and `,` and compared as a float;
- ground truth contains `,` or `;`: both sides are split on those characters, lengths must agree, and
  elements are compared pairwise (numbers as above; strings normalised with punctuation kept);
- otherwise both are compared as strings with all whitespace and punctuation removed, lower-cased.

Anything lenient (an LLM judge) lives elsewhere and never changes this result.
"""

from __future__ import annotations

import re
import string

_NUMBER_JUNK = ("$", "%", ",")


def is_float(value: object) -> bool:
    try:
        float(value)  # type: ignore[arg-type]
        return True
    except (TypeError, ValueError):
        return False


def normalize_number_str(text: str) -> float:
    """The official normalisation: only `$`, `%` and `,` are removed; anything else is not a number."""
    for ch in _NUMBER_JUNK:
        text = text.replace(ch, "")
    try:
        return float(text)
    except ValueError:
        return float("inf")  # never equal to a ground-truth number


def split_string(text: str, separators: tuple[str, ...] = (",", ";")) -> list[str]:
    return re.split("[" + "".join(re.escape(s) for s in separators) + "]", text)


def normalize_str(text: str, remove_punct: bool = True) -> str:
    text = re.sub(r"\s", "", text)
    if remove_punct:
        text = text.translate(str.maketrans("", "", string.punctuation))
    return text.lower()


def question_scorer(model_answer: str | None, ground_truth: str) -> bool:
    """True when `model_answer` matches `ground_truth` under GAIA's quasi-exact match."""
    answer = "None" if model_answer is None else str(model_answer)
    if is_float(ground_truth):
        return normalize_number_str(answer) == float(ground_truth)
    if any(sep in ground_truth for sep in (",", ";")):
        gt_items = split_string(ground_truth)
        ans_items = split_string(answer)
        if len(gt_items) != len(ans_items):
            return False
        for ans, gt in zip(ans_items, gt_items):
            if is_float(gt):
                if normalize_number_str(ans.strip()) != float(gt):
                    return False
            elif normalize_str(ans, remove_punct=False) != normalize_str(gt, remove_punct=False):
                return False
        return True
    return normalize_str(answer) == normalize_str(ground_truth)
