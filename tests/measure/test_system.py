"""The read-only system check: readings where the machine gives them, None where it does not."""

import pytest
from offloadbench.measure import system


def test_a_snapshot_has_every_field():
    snap = system.snapshot(busy_window_s=0.05)
    assert set(snap) == {"load_average", "busy_processes", "cpu_steal_share", "cpu_governor", "turbo", "cores_present",
                         "cores_usable", "gpus", "standin_gpu"}
    assert snap["cores_present"] >= snap["cores_usable"] >= 1
    if snap["load_average"] is not None:
        assert len(snap["load_average"]) == 3


def test_unreadable_proc_and_sys_give_none_not_an_error(monkeypatch):
    def refuse(*args, **kwargs):
        raise PermissionError("not here")

    monkeypatch.setattr(system.Path, "read_text", refuse)
    monkeypatch.setattr(system.os, "listdir", refuse)
    snap = system.snapshot(busy_window_s=0.01)
    assert snap["load_average"] is None and snap["cpu_governor"] is None and snap["turbo"] is None
    assert snap["cpu_steal_share"] is None
    assert snap["busy_processes"] is None
    assert system.advice(snap) == []


def test_a_busy_process_is_seen_and_ours_are_marked(monkeypatch):
    ticks = iter([{1: ("init", 0), 42: ("spinner", 100)}, {1: ("init", 0), 42: ("spinner", 120)}])
    monkeypatch.setattr(system, "_cpu_ticks", lambda: next(ticks))
    monkeypatch.setattr(system, "_ancestors", lambda pid: {1})
    monkeypatch.setattr(system.os, "sysconf", lambda name: 100)
    busy = system.busy_processes(window_s=0.2)
    assert busy == [{"pid": 42, "name": "spinner", "cpu_share": 1.0, "ours": False}]
    lines = system.advice({"busy_processes": busy, "load_average": [9.0, 1, 1], "cores_present": 2})
    assert any("busy (1-minute load 9.0 on 2 cores)" in line for line in lines)
    assert any("spinner (100% of a core)" in line for line in lines)


def test_a_lagging_load_average_alone_is_no_warning():
    ours = [{"pid": 7, "name": "python", "cpu_share": 0.9, "ours": True}]
    assert system.advice({"busy_processes": ours, "load_average": [1.9, 1, 1], "cores_present": 2}) == []
    unreadable = system.advice({"busy_processes": None, "load_average": [1.9, 1, 1], "cores_present": 2})
    assert unreadable == ["the machine was busy (1-minute load 1.9 on 2 cores)"]


def test_the_report_says_each_warning_once_with_the_checks_that_saw_it():
    from offloadbench.records import Environment, RoundRecord
    from offloadbench.report.text.conditions import advice_lines

    busy, hot = "the machine was busy (1-minute load 1.9 on 2 cores)", "GPU 0 clocks were held down: thermal"
    rounds = [RoundRecord.from_json(r) for r in ({"round": 1, "advice": [busy]}, {"round": 2, "advice": []},
                                                 {"round": 3, "advice": [busy, hot]})]
    assert advice_lines(Environment.from_json({"system": {"advice": [busy]}}), rounds) == [
        f"- Before the environment check and rounds 1 and 3, {busy}.",
        f"- Before round 3, {hot}.",
    ]


def test_steal_time_of_a_virtual_machine_is_reported():
    before, after = [100, 0, 10, 800, 0, 0, 0, 0], [200, 0, 20, 850, 0, 0, 0, 50]
    assert system.steal_share(before, after) == pytest.approx(50 / 210)
    assert any("steal" in line for line in system.advice({"cpu_steal_share": 0.2}))
    assert system.advice({"cpu_steal_share": 0.01}) == []


def test_clock_event_reasons_are_named():
    assert system.clock_event_reasons(0x4 | 0x40) == ["software power cap", "hardware thermal slowdown"]
    assert system.clock_event_reasons(0) == [] and system.clock_event_reasons(None) is None
    lines = system.advice({"gpus": [{"index": 0, "clock_event_reasons": ["gpu idle", "software power cap"],
                                     "persistence_mode": "off"}]})
    assert "GPU 0 clocks were held down: software power cap" in lines
    assert any("persistence mode off" in line for line in lines)


def test_without_nvidia_the_gpu_reading_is_none():
    from conftest import gpu_at_hand

    if gpu_at_hand() is not None:
        pytest.skip("a GPU (or the stand-in's NVML) is here")
    assert system.nvml_state() is None and system.gpu_clocks(0) is None and system.nvml_index_of("0000:19:00.0") is None


def test_a_pci_address_reads_in_nvmls_form_and_in_sysfss():
    assert system.parse_pci_bus_id("00000000:19:00.0") == (0, 0x19, 0)
    assert system.parse_pci_bus_id("0001:3B:02.0") == (1, 0x3B, 2)
    assert system.parse_pci_bus_id("garbage") is None and system.parse_pci_bus_id(None) is None


@pytest.mark.gpu
def test_nvml_reads_persistence_clocks_and_reasons():
    (gpu, *_) = system.nvml_state()
    assert gpu["name"] and gpu["persistence_mode"] in ("on", "off") and gpu["pci_bus_id"]
    assert gpu["sm_clock_mhz"] > 0 and gpu["sm_clock_max_mhz"] >= gpu["sm_clock_mhz"]
    assert isinstance(gpu["clock_event_reasons"], list)
    assert set(system.gpu_clocks(system.nvml_index_of(gpu["pci_bus_id"]))) == {"sm_mhz", "mem_mhz"}
