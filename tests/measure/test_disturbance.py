"""The per-cell disturbance monitor: a busy process beside a sampling worker is seen, and
measured about as large as it was; a quiet machine is not flagged. Ranges, not times."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from conftest import run_cell_record
from offloadbench.cells import Cell
from offloadbench.measure import disturbance
from offloadbench.measure.settings import Settings
from offloadbench.measure.timing import StopRule, WarmupRule

# A long enough sampling window that the tick-resolution of /proc/stat is small beside it.
WATCHED = Settings(stop=StopRule(budget_s=1.0, min_samples=8, min_sampling_s=1.0, target_rel_ci=1e-6),
                   warmup=WarmupRule(budget_s=0.1))
CELL = Cell("sum_rows", "numpy", "cpu", "float64", 256, "1")
pytestmark = pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs a second core for the busy process")


def busy_child() -> subprocess.Popen:
    """One core kept busy until killed (and for at most a minute, should the test die)."""
    return subprocess.Popen([sys.executable, "-c", "import time\nend = time.time() + 60\nwhile time.time() < end: pass"])


@pytest.mark.alone
def test_a_busy_process_beside_the_worker_flags_the_cell_with_its_share():
    child = busy_child()
    try:
        time.sleep(0.3)  # let it start spinning
        record = run_cell_record(CELL, WATCHED)
    finally:
        child.kill()
        child.wait()
    seen = record["disturbance"]
    assert record["status"] == "ok"
    assert seen["source"] in ("/proc/stat", "psutil")
    assert seen["window_s"] >= 0.9
    assert 0.6 <= seen["others_cores"] <= 1.3, seen  # the loop used one core
    assert seen["disturbed"]
    (flag,) = [f for f in record["diagnostics"]["flags"] if f["kind"] == "disturbed"]
    assert flag["region"] == "" and flag["size"] == seen["others_cores"]


@pytest.mark.alone
def test_a_quiet_machine_is_not_flagged():
    record = run_cell_record(CELL, WATCHED)
    seen = record["disturbance"]
    assert 0.6 <= seen["own_cores"] <= 1.1  # the cell itself kept one core busy
    assert not seen["disturbed"], seen
    assert not any(flag["kind"] == "disturbed" for flag in record["diagnostics"]["flags"])


@pytest.mark.alone
def test_readings_need_no_proc_where_psutil_has_the_counters(monkeypatch):
    monkeypatch.setattr(disturbance, "_proc_stat_busy_s", lambda: None)
    before = disturbance.read()
    end = time.process_time() + 0.2
    while time.process_time() < end:
        pass
    seen = disturbance.across([(before, disturbance.read())])
    assert seen["source"] == "psutil" and seen["own_cores"] > 0.5


def test_cpu_pressure_flags_a_window_where_tasks_waited_even_within_tick_resolution():
    quiet = disturbance.across([(disturbance.Reading(0.0, 10.0, 1.0, 0, "/proc/stat", 1_000_000),
                                 disturbance.Reading(0.1, 10.1, 1.1, 0, "/proc/stat", 1_001_000))])
    assert not quiet["disturbed"] and abs(quiet["cpu_pressure"] - 0.01) < 1e-6
    waited = disturbance.across([(disturbance.Reading(0.0, 10.0, 1.0, 0, "/proc/stat", 1_000_000),
                                  disturbance.Reading(0.1, 10.15, 1.1, 0, "/proc/stat", 1_050_000))])
    assert waited["disturbed"] and "waited for a CPU 50% of the time" in disturbance.flag_for(waited).text
