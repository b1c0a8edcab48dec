"""Property-based fuzzing of everything that reads results from elsewhere: cell records,
environment.json, round records, bundles, the files a results folder may hold instead of
regular ones, and the outputs built from their text.

Each generated input must end either in success or in one printable line (a UserError)
that names the file, never in a traceback; and what is built from it is inert in every
output format: no live link, tag or handler in the Markdown and HTML, no formula or bare
CR in a CSV, no control character in LaTeX or in anything printed. The generated values
include keys, control characters, formulas, bare URLs, strings and sample lists past their
bounds, and numbers past what JSON keeps finite. The cases are derandomized, so a failure
reproduces, and cheap, so ~2,500 of them fit in about a minute.
"""

from __future__ import annotations

import copy
import io
import json
import math
import os
import re
import tarfile
import tempfile
from pathlib import Path

import pandas as pd
import pytest
from conftest import FINGERPRINT, make_record
from crafted import CONTROL, FORMULA_CELL, LIVE_MARKDOWN, printed_problems, without_blocking
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from offloadbench.analysis.compare import PROVENANCE_FIELDS, provenance_diff
from offloadbench.analysis.measured import Analysis, load_cells
from offloadbench.analysis.tables import read_table, timings_table
from offloadbench.bundles import unpack
from offloadbench.config import load_foreign_config
from offloadbench.csvsafe import write_csv
from offloadbench.errors import UserError
from offloadbench.records import Environment, load_environment, load_record, load_round
from offloadbench.report.escape import md_data, md_frame, md_text, safe_html, tex_escape
from offloadbench.report.text.conditions import conditions_section
from offloadbench.report.text.latex_tables import machine_tex
from offloadbench.report.text.markdown import machine_section
from offloadbench.verdicts import Judging


def fuzz(examples: int):
    return settings(max_examples=examples, derandomize=True, database=None, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
TINY = Analysis(resamples=20)
HOSTILE = st.sampled_from([
    "<script>alert(1)</script>", '<img src="/etc/passwd.png" onerror=alert(1)>', "[x](javascript:alert(1))",
    "![y](/home/me/secret.png)", "$\\frac{$", "`", "|", "\n# heading\n", "&lt;", "\\", "*bold*", "<!--",
    "https://evil.example/p", "www.evil.example", "owner@evil.example", '=HYPERLINK("https://evil.example")',
    "+cmd|' /C calc'!A0", "@SUM(1+1)", "-2+3", "\t=1", "\r=1+1", "\x1b]0;title\x07", "\x1b[31m", "\x00", "\x7f",
    "\u202e", "\nerror: forged",
])
HUGE = st.sampled_from(["y" * 2001, "x" * 70_000])  # past a reason's maxLength, past any text's bound
TEXT = st.one_of(st.text(max_size=30), HOSTILE, st.builds(lambda a, b: a + b, st.text(max_size=8), HOSTILE), HUGE)
KEYS = st.one_of(st.text(max_size=12), HOSTILE, st.just("k" * 1001))
SAMPLE_LISTS = st.sampled_from([[1e-3] * 100_001, [1e-3] * 3000, [1e308] * 4, [5e-324], [-1.0], []]).map(list)  # a copy
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20),
                    st.floats(allow_nan=False, allow_infinity=False), TEXT, SAMPLE_LISTS)
JSON = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                     st.dictionaries(KEYS, inner, max_size=4)), max_leaves=12)


def read_fuzzed(reader, name: str, document, draw):
    """`reader` applied to the document written as file `name`: what it returns, or None
    after checking that its refusal is one line naming the file."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_text(raw_text(document, draw))
        try:
            return reader(path)
        except UserError as error:
            one_line_naming(error, path)
            return None


def one_line_naming(error: UserError, path: Path) -> None:
    text = str(error)
    assert "\n" not in text and printed_problems(f"error: {text}") == [], text
    assert path.name in text, text


def mutate(document: dict, draw) -> dict:
    """The document with a few values replaced, removed or added, anywhere in it."""
    document = copy.deepcopy(document)
    for _ in range(draw(st.integers(1, 3))):
        node, key = document, None
        while True:
            keys = list(node) if isinstance(node, dict) else list(range(len(node)))
            if not keys:
                key = None
                break
            key = draw(st.sampled_from(keys))
            if not isinstance(node[key], (dict, list)) or draw(st.booleans()):
                break
            node = node[key]
        if key is None:
            continue
        action = draw(st.sampled_from(["replace", "delete", "add"]))
        if action == "replace":
            node[key] = draw(JSON)
        elif action == "delete" and isinstance(node, dict):
            del node[key]
        elif isinstance(node, dict):
            node[draw(KEYS)] = draw(JSON)
    return document


# Numbers JSON can spell but a reader must refuse: past a float's range, past 64 bits.
OUT_OF_RANGE = ["1e400", "-1e400", "123456789012345678901234567890", str(2**63)]


def plant(document: dict, draw, places) -> dict:
    """The document with text from data (a key, where a place takes one) put where a report shows it."""
    for place in draw(st.lists(st.sampled_from(places), max_size=3)):
        place(document, draw(TEXT), draw(KEYS))
    return document


RECORD_PLACES = [
    lambda r, text, key: r.update(status="skipped", reason=text),
    lambda r, text, key: r["diagnostics"].update(flags=[text]),
    lambda r, text, key: r["device"].update(name=text),
    lambda r, text, key: r["provenance"].update(hostname=text),
]


def raw_text(document, draw) -> str:
    """JSON text, sometimes spoiled: truncated, with NaN, a number out of range, or not an object at all."""
    text = json.dumps(document)
    spoil = draw(st.sampled_from(["none", "none", "none", "truncate", "nan", "range", "array"]))
    if spoil == "truncate":
        return text[: draw(st.integers(0, max(0, len(text) - 1)))]
    if spoil == "nan":
        return text.replace("0.001", "NaN", 1).replace("4", "Infinity", 1)
    if spoil == "range":
        return re.sub(r'(": \[?)-?\d+(\.\d+)?(e-?\d+)?', rf"\g<1>{draw(st.sampled_from(OUT_OF_RANGE))}", text,
                      count=draw(st.integers(1, 3)))
    if spoil == "array":
        return json.dumps([document])
    return text


def assert_outputs_inert(frame: pd.DataFrame, markdown: str, tex: str, name: str = "timings") -> None:
    """Built from data: the CSV of `frame` holds no formula or bare CR and reads back row for
    row, the Markdown no live link and its page nothing that acts, the LaTeX no control character."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{name}.csv"
        write_csv(frame, path)
        data = path.read_bytes()
        assert b"\r" not in data and not FORMULA_CELL.search(data.decode()), data[:300]
        assert len(read_table(name, str(path))) == len(frame)
    assert not LIVE_MARKDOWN.search(markdown), markdown[:300]
    assert_inert(safe_html(markdown, {}, "t"))
    assert not CONTROL.search(tex.replace("\n", "")), tex[:300]


def table_markdown(frame: pd.DataFrame) -> str:
    """A table of data as the report writes one: a pipe table, every text cell through md_text."""
    shown = md_frame(frame.astype(object).where(frame.notna(), ""))
    rows = [[md_text(c) for c in shown.columns], ["---"] * len(shown.columns)]
    rows += [list(map(str, row)) for row in shown.itertuples(index=False)]
    return "\n".join("| " + " | ".join(row) + " |" for row in rows)


@fuzz(700)
@given(st.data())
def test_fuzzed_cell_records_load_or_fail_in_one_line(data):
    record = mutate(plant(make_record(n=8, size=64), data.draw, RECORD_PLACES), data.draw)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "raw" / "matmul" / "numpy-cpu-float32-n64-t1" / "p1.json"
        path.parent.mkdir(parents=True)
        path.write_text(raw_text(record, data.draw))
        try:
            cells = load_cells([path], Environment.from_json({"fingerprint": FINGERPRINT}), TINY)
        except UserError as error:
            one_line_naming(error, path)
            return
        for mc in cells:  # what the tables then ask of a cell
            if mc.status == "ok":
                ci = mc.interval("compute")
                assert 0 < ci.low <= ci.value <= ci.high and math.isfinite(ci.high), ci
            else:
                assert mc.reason == mc.records[0].reason and isinstance(mc.reason, str)
            recorded = {"", *(flag.text for r in mc.records for flag in r.flags), *(r.reason for r in mc.records)}
            assert all(row["text"] in recorded for row in mc.flag_rows()), mc.flag_rows()  # the records' own words
        timings = timings_table(cells, "m")
        assert len(timings) == len(cells)
        text = timings.select_dtypes(include=["object", "str"]).to_numpy().ravel()
        assert_outputs_inert(timings, table_markdown(timings),
                             machine_tex("timings", timings, Judging(), "m") + "\n".join(tex_escape(v) for v in text if isinstance(v, str)))


ENVIRONMENT = {"hostname": "h", "cpu_model": "c", "logical_cores": 4, "usable_cores": 4, "memory_bytes": 2**34,
               "gpus": [{"name": "g", "total_memory_bytes": 2**34}], "fingerprint": dict(FINGERPRINT),
               "numpy_blas": {"name": "openblas", "version": "0.3"}, "blas_env": {"A": "1"},
               "threadpools": [{"internal_api": "openblas", "version": "0.3"}], "devices": {"cuda": "no GPU"},
               "system": {"advice": ["quiet"]}, "torch_version": "2.13.0", "os": "Linux"}


ENVIRONMENT_PLACES = [
    lambda e, text, key: e.update(cpu_model=text),
    lambda e, text, key: e.update(os=text),
    lambda e, text, key: e.update(nvidia_driver=text),
    lambda e, text, key: e["gpus"][0].update(name=text),
    lambda e, text, key: e["blas_env"].update({key: text}),
    lambda e, text, key: e["threadpools"][0].update(version=text),
    lambda e, text, key: e["system"]["advice"].append(text),
]


@fuzz(500)
@given(st.data())
def test_fuzzed_environments_validate_or_fail_in_one_line_and_render_inert(data):
    planted = plant(copy.deepcopy(ENVIRONMENT), data.draw, ENVIRONMENT_PLACES)
    env = read_fuzzed(load_environment, "environment.json", mutate(planted, data.draw), data.draw)
    if env is None:
        return
    lines = machine_section(md_data(env), "m")
    reference = Environment.from_json(ENVIRONMENT)
    diff = provenance_diff({"a": reference, "b": env}, {"a": [], "b": []})
    differs = {name for name, read in PROVENANCE_FIELDS.items() if str(read(reference)) != str(read(env))}
    assert list(diff.columns) == ["field", "decides", "a", "b"] and set(diff["field"]) == differs
    assert all(isinstance(v, str) for v in diff[["a", "b"]].to_numpy().ravel())
    assert_outputs_inert(diff, "\n".join(lines) + "\n\n" + table_markdown(diff),
                         "\n".join(tex_escape(v) for v in diff.to_numpy().ravel()), "provenance_diff")


ROUND = {"kind": "round", "round": 1, "processes": 3, "measured_now": 4, "estimated_s": 10.0, "took_s": 12.0,
         "statuses": {"ok": 4}, "advice": ["the machine was busy"], "workers": {}, "system_before": {}}


@fuzz(350)
@given(st.data())
def test_fuzzed_round_records_validate_or_fail_in_one_line(data):
    record = read_fuzzed(load_round, "round-1.json", mutate(ROUND, data.draw), data.draw)
    if record is None:
        return
    rounds = [record]
    timings = pd.DataFrame(columns=["status", "processes", "ci_scope", "shares_cores"])
    markdown = "\n".join(conditions_section(md_data(Environment.from_json(ENVIRONMENT)), md_data(rounds), timings))
    assert not LIVE_MARKDOWN.search(markdown), markdown[:300]
    assert_inert(safe_html(markdown, {}, "t"))


MEMBER = st.tuples(
    st.sampled_from(["m/environment.json", "m/raw/a.json", "m/sub/environment.json", "../x", "/abs", "m/../../y",
                     "m/link", "other/environment.json", "m", "m/raw", "m/dev"]),
    st.sampled_from([tarfile.REGTYPE, tarfile.DIRTYPE, tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.CHRTYPE,
                     tarfile.FIFOTYPE]),
    st.binary(max_size=64),
)


@fuzz(350)
@given(st.lists(MEMBER, max_size=6), st.booleans(), st.integers(0, 400))
def test_fuzzed_bundles_unpack_or_fail_in_one_line(members, gzipped, cut):
    with tempfile.TemporaryDirectory() as tmp:
        bundle = Path(tmp) / "m.tar.gz"
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz" if gzipped else "w") as tar:
            for name, kind, payload in members:
                info = tarfile.TarInfo(name)
                info.type = kind
                if kind == tarfile.REGTYPE:
                    info.size = len(payload)
                else:
                    info.linkname = "/etc/passwd" if kind in (tarfile.SYMTYPE, tarfile.LNKTYPE) else ""
                tar.addfile(info, io.BytesIO(payload) if kind == tarfile.REGTYPE else None)
        data = buffer.getvalue()
        bundle.write_bytes(data[:cut] if cut < 40 else data)  # sometimes cut short
        dest = Path(tmp) / "out" / "m"
        try:
            unpack(bundle, dest, max_unpacked_mb=1, max_members=5)
        except UserError as error:
            one_line_naming(error, bundle)
            assert not dest.exists()
            return
        assert (dest / "environment.json").is_file()
        for path in dest.rglob("*"):
            assert path.resolve().is_relative_to(dest.resolve()) and not path.is_symlink()


@fuzz(400)
@given(st.lists(TEXT, min_size=1, max_size=4))
def test_text_from_data_never_acts_in_html(texts):
    markdown = "\n".join([f"- {md_text(t)}" for t in texts] + [f"| a |\n|---|\n| {md_text(texts[0])} |"])
    assert not LIVE_MARKDOWN.search(markdown), markdown
    html = safe_html(markdown, {}, texts[0])
    assert_inert(html)


def _link_to_zero(path: Path) -> None:
    path.symlink_to("/dev/zero")


def _link_to_a_copy(path: Path) -> None:
    copy_path = path.with_name("real-" + path.name)
    copy_path.write_text(path.read_text()) if path.exists() else copy_path.write_text("{}")
    path.unlink(missing_ok=True)
    path.symlink_to(copy_path)


SPECIAL = {"link to /dev/zero": _link_to_zero, "link to a copy": _link_to_a_copy, "FIFO": os.mkfifo,
           "folder": os.mkdir}
READERS = {  # name of the file: its reader
    "p1.json": load_record, "environment.json": load_environment, "round.json": load_round,
    "timings.csv": lambda path: read_table("timings", str(path)),
    "config.yaml": lambda path: load_foreign_config(path, "the bundle's config.yaml"),
}


@fuzz(120)
@given(st.sampled_from(sorted(SPECIAL)), st.sampled_from(sorted(READERS)))
def test_special_files_are_refused_in_one_line_without_reading(kind, name):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "raw" / "matmul" / "numpy-cpu-float32-n64-t1" / name
        path.parent.mkdir(parents=True)
        if kind == "link to a copy":
            path.write_text(json.dumps(make_record(n=8, size=64)) if name.endswith(".json") else "{}\n")
        SPECIAL[kind](path)
        error = without_blocking(lambda: READERS[name](path))
        assert isinstance(error, UserError), f"{kind} {name}: {error!r}"
        one_line_naming(error, path)
        assert re.search(r"(a symbolic link|a FIFO|a folder); only regular files are read", str(error)), error


def assert_inert(html: str) -> None:
    lowered = html.lower()
    assert "<script" not in lowered and "<img" not in lowered and "<!--" not in lowered
    assert not re.search(r"<[a-z]+[^>]*\son\w+=", lowered)
    assert 'href="javascript' not in lowered


# --- a results folder's own decisions.csv, printed by `make summary FROM=<folder>` ------------

H200 = Path(__file__).resolve().parents[1] / "data" / "h200"


def _folder_with_decisions(tmp: Path, edit) -> Path:
    """A copy of the shipped H200 results folder whose decisions.csv `edit` changed (a frame of text)."""
    import shutil

    folder = tmp / "h200"
    if not folder.exists():
        shutil.copytree(H200, folder, ignore=shutil.ignore_patterns("raw"))
    frame = pd.read_csv(H200 / "decisions.csv", dtype=str, keep_default_na=False)
    edit(frame).to_csv(folder / "decisions.csv", index=False)
    return folder


def _summary_of(folder: Path) -> tuple[int, str, str]:
    import contextlib

    from offloadbench.report.text import summary

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = summary.main([str(folder)])
    return code, out.getvalue(), err.getvalue()


def _set(column: str, value: str):
    def edit(frame: pd.DataFrame) -> pd.DataFrame:
        frame.loc[len(frame) - 1, column] = value
        return frame
    return edit


def _without(column: str):
    return lambda frame: frame.drop(columns=[column])


CRAFTED_DECISIONS = {  # the security review's cases: each was a traceback (exit 2)
    **{f"from_size {v!r}": _set("from_size", v) for v in ("nan", "inf", "abc", "")},
    **{f"size {v!r}": _set("size", v) for v in ("inf", "\x1b[31m", "\x1b]0;t\x07")},
    **{f"without {c}": _without(c) for c in ("from_size", "size", "speedup_ci_low")},
    "empty op": _set("op", ""),
    "empty decision": _set("decision", ""),
}


@pytest.mark.parametrize("case", CRAFTED_DECISIONS)
def test_a_crafted_decisions_table_of_a_folder_is_one_error_line(tmp_path, case):
    folder = _folder_with_decisions(tmp_path, CRAFTED_DECISIONS[case])
    code, out, err = _summary_of(folder)
    assert code == 1 and out == "", (case, out)
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "decisions.csv" in lines[0], err
    assert printed_problems(lines[0]) == [], lines[0]


def test_the_untouched_folder_prints_its_decisions(tmp_path):
    code, out, err = _summary_of(_folder_with_decisions(tmp_path, lambda frame: frame))
    assert code == 0 and err == "" and "use torch" in out


CELL_VALUES = st.one_of(st.sampled_from([
    "", "nan", "NaN", "inf", "-inf", "1e400", "-1", "0", "0.5", "2.5", "1e308", "-1e308", "True", "False", "yes",
    "all", "1", "?", "use torch", "use", "stay with NumPy", "cannot tell yet", "faster", "256: numpy; 1024: ?",
    "123456789012345678901234567890", "cuda", "cpu", "pays once the data stay for at least 3 calls",
]), TEXT)


@fuzz(150)
@given(st.data())
def test_fuzzed_decisions_of_a_folder_print_or_fail_in_one_line(tmp_path_factory, data):
    """Any cells of a folder's decisions.csv changed, or a column removed: the summary prints
    its table or says in one line why not, never a traceback."""
    base = pd.read_csv(H200 / "decisions.csv", dtype=str, keep_default_na=False)
    edits = data.draw(st.lists(st.tuples(st.sampled_from(list(base.columns)), st.integers(0, len(base) - 1),
                                         CELL_VALUES), min_size=1, max_size=4))
    dropped = data.draw(st.lists(st.sampled_from(list(base.columns)), max_size=1))

    def edit(frame: pd.DataFrame) -> pd.DataFrame:
        for column, row, value in edits:
            frame.loc[row, column] = value
        return frame.drop(columns=dropped)

    folder = _folder_with_decisions(tmp_path_factory.mktemp("fuzzed"), edit)
    code, out, err = _summary_of(folder)
    if code == 0:
        assert err == "" and printed_problems(out) == [], out
    else:
        lines = err.splitlines()
        assert code == 1 and out == "" and len(lines) == 1 and lines[0].startswith("error: "), err
        assert "decisions.csv" in lines[0] and printed_problems(lines[0]) == [], lines[0]
