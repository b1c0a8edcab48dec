"""How a job that fails ends: one line on the terminal naming the step and the stage it was
writing, the traceback in its log only."""

from __future__ import annotations

import pytest
from offloadbench.errors import UserError
from offloadbench.logs import run_logged, stage


def fails_in_a_section():
    with stage("the report"), stage("the section of op heat_step"):
        {}["device"]


def test_a_failing_step_says_its_stage_and_op_in_one_line_and_keeps_the_traceback_in_its_log(tmp_path, capfd):
    log = tmp_path / "report.log"
    with pytest.raises(SystemExit) as ended:
        run_logged(str(log), fails_in_a_section, "report of ci-box")
    assert ended.value.code == 1
    printed = capfd.readouterr().err.strip().splitlines()
    assert printed == [
        (f"error: report of ci-box failed while writing the report / the section of op heat_step: KeyError: "
         f"'device'; the traceback is in {log}. The measurements are kept: once it is fixed, run again and only "
         "this step is redone")]
    written = log.read_text()
    assert "Traceback (most recent call last)" in written and "fails_in_a_section" in written


def test_a_failure_outside_any_stage_names_the_step_only(tmp_path, capfd):
    def broken():
        raise ValueError("bad\nvalue")

    with pytest.raises(SystemExit):
        run_logged(str(tmp_path / "x.log"), broken, "figure speedup of ci-box")
    line = capfd.readouterr().err.strip()
    assert line.startswith("error: figure speedup of ci-box failed: ValueError: bad value; the traceback is in")


def test_a_later_step_does_not_inherit_an_earlier_failures_stage(tmp_path, capfd):
    with pytest.raises(SystemExit):
        run_logged(str(tmp_path / "a.log"), fails_in_a_section, "report")

    def broken():
        raise RuntimeError("later")

    with pytest.raises(SystemExit):
        run_logged(str(tmp_path / "b.log"), broken, "latex")
    assert "while writing" not in capfd.readouterr().err.strip().splitlines()[-1]


def test_a_user_error_stays_its_own_one_line(tmp_path, capfd):
    def refused():
        with stage("the tables"):
            raise UserError("results folder x: no raw/ folder with records")

    with pytest.raises(SystemExit):
        run_logged(str(tmp_path / "c.log"), refused, "aggregate")
    assert capfd.readouterr().err.strip() == "error: results folder x: no raw/ folder with records"
