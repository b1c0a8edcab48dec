"""docs/measuring.md states the method's thresholds in words; each is held here to the value
the code applies and records (the same record the report's Method section is worded from,
tests/conftest.py's recorded), written as the report writes it. A threshold changed in its
home fails this test until the page says the new value."""

from pathlib import Path

import pytest
from conftest import recorded
from offloadbench.report.text.method import Numbers

MEASURING = Path(__file__).resolve().parents[2] / "docs" / "measuring.md"

# a phrase of docs/measuring.md, each {how:key} filled with that recorded threshold as the report words it
PHRASES = [
    "a block lies within {percent:warmup_rel_tol} of the best block",
    "the C heap grew by less than {size:heap_growth_bytes}",
    "while the heap still grows the cap is {seconds:warmup_growing_budget_s}",
    "the timer's own cost is below {percent:max_overhead_frac}",
    "within {percent:warmup_rel_tol} of the region's best ({ms:preroll_s} to {ms:preroll_max_s} of them",
    "at most {ms:preroll_copy_max_s} for a GPU's copies",
    "has a {percent:bout_stop_confidence} CI within",
    "others used more than {number:disturbed_cores} of a core",
    "waited for a CPU more than {percent:disturbed_pressure} of the time",
    "explains {percent:bimodal_explained_variance} or more",
    "moved by more than {percent:clock_change_rel}",
    "the larger of {percent:outlier_min_rel} and {number:outlier_sigmas}σ",
    "keeping at least {number:min_kept_processes}",
    "share at least {number:min_paired_rounds} rounds",
    "spans more than {number:max_ci_span}×",
]


def worded(phrase: str, numbers: Numbers) -> str:
    """The phrase with each {how:key} replaced by the threshold worded by Numbers.how."""
    parts = phrase.replace("}", "{").split("{")
    return "".join(getattr(numbers, part.split(":")[0])(part.split(":")[1]) if i % 2 else part
                   for i, part in enumerate(parts))


@pytest.mark.parametrize("phrase", PHRASES)
def test_the_measuring_page_states_each_threshold_the_code_applies(tmp_path, phrase):
    numbers = Numbers(recorded(tmp_path))
    assert worded(phrase, numbers) in MEASURING.read_text(), f"docs/measuring.md no longer says {phrase!r}"


def test_a_changed_threshold_no_longer_matches_the_page(tmp_path):
    method = recorded(tmp_path)
    numbers = Numbers({**method, "outlier_min_rel": method["outlier_min_rel"] * 1.5})
    (outliers,) = [phrase for phrase in PHRASES if "outlier_min_rel" in phrase]
    assert worded(outliers, numbers) not in MEASURING.read_text()
