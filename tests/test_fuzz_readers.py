"""Property-based fuzzing of everything that reads results from elsewhere: cell records,
environment.json, round records, bundles, and the page built from their text.

Each generated input must end either in success or in one line (a UserError) that names
the file, never in a traceback; and no text from data may act in the HTML. The cases are
derandomized, so a failure reproduces, and cheap, so ~2,300 of them fit well under two
minutes.
"""

from __future__ import annotations

import copy
import io
import json
import re
import tarfile
import tempfile
from pathlib import Path

import pandas as pd
from conftest import FINGERPRINT, make_record
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from offloadbench.analysis.compare import provenance_diff
from offloadbench.analysis.measured import Analysis, load_cells
from offloadbench.bundles import unpack
from offloadbench.errors import UserError
from offloadbench.records import load_environment, load_round
from offloadbench.report.escape import md_data, md_text, safe_html
from offloadbench.report.text.conditions import conditions_section
from offloadbench.report.text.markdown import machine_section


def fuzz(examples: int):
    return settings(max_examples=examples, derandomize=True, database=None, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
TINY = Analysis(resamples=20)
HOSTILE = st.sampled_from([
    "<script>alert(1)</script>", '<img src="/etc/passwd.png" onerror=alert(1)>', "[x](javascript:alert(1))",
    "![y](/home/me/secret.png)", "$\\frac{$", "`", "|", "\n# heading\n", "&lt;", "\\", "*bold*", "<!--",
])
TEXT = st.one_of(st.text(max_size=30), HOSTILE, st.builds(lambda a, b: a + b, st.text(max_size=8), HOSTILE))
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20),
                    st.floats(allow_nan=False, allow_infinity=False), TEXT)
JSON = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                     st.dictionaries(TEXT, inner, max_size=4)), max_leaves=12)


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
    assert "\n" not in text, text
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
            node[draw(TEXT)] = draw(JSON)
    return document


def raw_text(document, draw) -> str:
    """JSON text, sometimes spoiled: truncated, with NaN, or not an object at all."""
    text = json.dumps(document)
    spoil = draw(st.sampled_from(["none", "none", "none", "truncate", "nan", "array"]))
    if spoil == "truncate":
        return text[: draw(st.integers(0, max(0, len(text) - 1)))]
    if spoil == "nan":
        return text.replace("0.001", "NaN", 1).replace("4", "Infinity", 1)
    if spoil == "array":
        return json.dumps([document])
    return text


@fuzz(700)
@given(st.data())
def test_fuzzed_cell_records_load_or_fail_in_one_line(data):
    record = mutate(make_record(n=8, size=64), data.draw)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "raw" / "matmul" / "numpy-cpu-float32-n64-t1" / "p1.json"
        path.parent.mkdir(parents=True)
        path.write_text(raw_text(record, data.draw))
        try:
            cells = load_cells([path], {"fingerprint": FINGERPRINT}, TINY)
        except UserError as error:
            one_line_naming(error, path)
            return
        for mc in cells:  # what the tables then ask of a cell
            mc.interval("compute") if mc.status == "ok" else mc.reason
            assert mc.flags is not None


ENVIRONMENT = {"hostname": "h", "cpu_model": "c", "logical_cores": 4, "usable_cores": 4, "memory_bytes": 2**34,
               "gpus": [{"name": "g", "total_memory_bytes": 2**34}], "fingerprint": dict(FINGERPRINT),
               "numpy_blas": {"name": "openblas", "version": "0.3"}, "blas_env": {"A": "1"},
               "threadpools": [{"internal_api": "openblas", "version": "0.3"}], "devices": {"cuda": "no GPU"},
               "system": {"advice": ["quiet"]}, "torch_version": "2.13.0", "os": "Linux"}


@fuzz(500)
@given(st.data())
def test_fuzzed_environments_validate_or_fail_in_one_line_and_render_inert(data):
    env = read_fuzzed(load_environment, "environment.json", mutate(ENVIRONMENT, data.draw), data.draw)
    if env is None:
        return
    lines = machine_section(md_data(env), "m")
    provenance_diff({"a": ENVIRONMENT, "b": env}, {"a": [], "b": []})
    assert_inert(safe_html("\n".join(lines), {}, "t"))


ROUND = {"kind": "round", "round": 1, "rounds": 3, "measured_now": 4, "estimated_s": 10.0, "took_s": 12.0,
         "statuses": {"ok": 4}, "advice": ["the machine was busy"], "workers": {}, "system_before": {}}


@fuzz(350)
@given(st.data())
def test_fuzzed_round_records_validate_or_fail_in_one_line(data):
    record = read_fuzzed(load_round, "p1.json", mutate(ROUND, data.draw), data.draw)
    if record is None:
        return
    rounds = [record]
    timings = pd.DataFrame(columns=["status", "processes", "ci_scope", "shares_cores"])
    assert_inert(safe_html("\n".join(conditions_section(md_data(ENVIRONMENT), md_data(rounds), timings)), {}, "t"))


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
    html = safe_html(markdown, {}, texts[0])
    assert_inert(html)


def assert_inert(html: str) -> None:
    lowered = html.lower()
    assert "<script" not in lowered and "<img" not in lowered and "<!--" not in lowered
    assert not re.search(r"<[a-z]+[^>]*\son\w+=", lowered)
    assert 'href="javascript' not in lowered
