"""The report's Method section is worded from the thresholds the run recorded, each written
by the module that applies it: change one in its home and the record and the text follow."""

import pytest
from conftest import recorded
from offloadbench import verdicts
from offloadbench.analysis import processes
from offloadbench.config import validate
from offloadbench.jobs import bout
from offloadbench.measure import diagnostics, disturbance, timing
from offloadbench.measure.settings import Settings
from offloadbench.measure.timing import PREROLL_MAX_S, BlockRule, StopRule, WarmupRule
from offloadbench.records import RoundRecord
from offloadbench.report.text.method import UNRECORDED, method_section, recorded_method
from offloadbench.run_settings import RunSettings
from offloadbench.verdicts import MAX_CI_SPAN, Judging

SETTINGS = validate({})
MEASURE = RunSettings.from_config(SETTINGS).measure


def text(method: dict) -> str:
    return "\n".join(method_section(MEASURE, SETTINGS["analysis"], "each cell in 3 processes", method, Judging()))


def test_every_recorded_threshold_changes_the_text(tmp_path):
    method = recorded(tmp_path)
    assert len(method) >= 18 and UNRECORDED not in text(method)
    base = text(method)
    for key, value in method.items():
        changed = {**method, key: value * 1.7 + 0.013}
        assert text(changed) != base, f"{key} does not reach the Method section"


# (the module that applies it, its name there, the key it is recorded under, a new value)
HOMES = [
    (disturbance, "DISTURBED_CORES", "disturbed_cores", 0.3),
    (disturbance, "DISTURBED_PRESSURE", "disturbed_pressure", 0.4),
    (diagnostics, "CLOCK_CHANGE_REL", "clock_change_rel", 0.15),
    (diagnostics, "BIMODAL_EXPLAINED_VARIANCE", "bimodal_explained_variance", 0.9),
    (timing, "HEAP_GROWTH_BYTES", "heap_growth_bytes", 128 * 1024),
    (timing, "PREROLL_S", "preroll_s", 0.004),
    (timing, "PREROLL_MAX_S", "preroll_max_s", 0.08),
    (timing, "COPY_PREROLL_MAX_S", "preroll_copy_max_s", 0.02),
    (bout, "STOP_CONFIDENCE", "bout_stop_confidence", 0.9),
    (processes, "OUTLIER_SIGMAS", "outlier_sigmas", 3.0),
    (processes, "MIN_KEPT", "min_kept_processes", 4),
    (verdicts, "MAX_CI_SPAN", "max_ci_span", 3.0),
]


@pytest.mark.parametrize("module, name, key, value", HOMES, ids=[h[2] for h in HOMES])
def test_a_constant_changed_in_its_home_is_recorded_and_worded(tmp_path, monkeypatch, module, name, key, value):
    before = text(recorded(tmp_path))
    monkeypatch.setattr(module, name, value)
    method = recorded(tmp_path)
    assert method[key] == value
    assert text(method) != before


def test_the_rules_thresholds_are_recorded_as_applied(tmp_path):
    settings = Settings(warmup=WarmupRule(rel_tol=0.07, budget_s=0.5, growing_budget_s=2.0),
                        block=BlockRule(min_sample_s=2e-3, max_overhead_frac=2e-3),
                        stop=StopRule(target_rel_ci=0.03, min_samples=8, budget_s=4.0), turn_s=0.05, check_rows=16)
    method = recorded(tmp_path, settings)
    words = text(method)
    for said in ("within ±7% of the best block", "at most 0.5 s", "2 s while the heap", "at least 2 ms",
                 "below 0.2%", "at least 50 ms", "at least 4 cycles; in the first two rounds it goes on, from 8 cycles", "within ±3%", "4 s per region", "16 sampled rows"):
        assert said in words, said
    outlier = recorded(tmp_path)["outlier_min_rel"]
    assert outlier == pytest.approx(0.20) and f"beyond {outlier:.0%}" in text(recorded(tmp_path))
    assert f"more than {MAX_CI_SPAN:g}×" in text(recorded(tmp_path))


def test_records_from_before_the_thresholds_were_recorded_say_so():
    words = text(recorded_method([RoundRecord(round=1)], Judging()))
    assert words.count(UNRECORDED) >= 15 and "predate recorded thresholds" in words


def test_records_from_before_the_pre_roll_waited_for_the_best_keep_their_own_rule(tmp_path):
    method = recorded(tmp_path)
    older = {k: v for k, v in method.items() if k != "preroll_max_s"} | {"preroll_up_to_s": 0.05}
    assert "none for calls of 50 ms or more" in text(older) and "?" not in text(older).split("untimed")[1][:200]
    assert f"at most {PREROLL_MAX_S * 1000:g} ms" in text(method)  # the current rule, from the records
