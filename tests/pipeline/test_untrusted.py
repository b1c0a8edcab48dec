"""Results from other machines are untrusted input: each crafted case of the review, as a
test. No traceback, no unescaped string in HTML, bounded unpacking and reading, and no
speedup from a result that failed its check."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import tracemalloc
from html import unescape
from pathlib import Path

import crafted
import numpy as np
import pytest
from conftest import FINGERPRINT, make_record
from crafted import tar_bundle, without_blocking, write_record
from offloadbench import stats
from offloadbench.analysis.measured import Analysis, load_cells
from offloadbench.analysis.sources import Source, SourceError
from offloadbench.bundles import BundleError, make_bundle, resolve_sources, unpack
from offloadbench.config import ConfigError
from offloadbench.errors import UserError
from offloadbench.jobs.lock import LockError, host_lock
from offloadbench.logs import run_logged
from offloadbench.records import Environment, MalformedRecord, load_record
from offloadbench.report.escape import md_text, safe_html
from offloadbench.report.publish import render, run_settings, write_comparison
from offloadbench.report.text.method import processes_held

ROOT = Path(__file__).resolve().parents[2]
FAST = Analysis(resamples=200)
XSS = '<script>alert("x")</script><img src="/etc/secret.png" onerror=alert(1)>[link](javascript:alert(2))'


def write_results(folder: Path, env: dict | None = None, reason: str = "", flag: str = "",
                  device_name: str | None = None) -> Source:
    """crafted.write_results as a source (numpy and torch matmul, a skipped cuda cell)."""
    return Source(folder.name, crafted.write_results(folder, env, reason, flag, device_name))


def one_line(error: BaseException) -> str:
    text = str(error)
    assert "\n" not in text and "Traceback" not in text, text
    return text


def assert_inert(html: str) -> None:
    """Nothing that came from data acts in the page: no tag, handler, link or local image."""
    assert "<script" not in html.lower()
    assert "onerror" not in re.sub(r"&lt;.*?&gt;", "", html)  # only as escaped text
    assert 'href="javascript' not in html.lower()
    assert re.findall(r'<img [^>]*src="(?!data:image/png;base64,)', html) == []


# 1. HTML that is safe to share

def test_data_in_environment_reasons_and_flags_reaches_html_inert(tmp_path):
    source = write_results(tmp_path / "evil", env={"cpu_model": XSS, "os": XSS, "nvidia_driver": XSS,
                                                   "gpus": [{"name": XSS}], "system": {"advice": [XSS]}},
                           reason=XSS, flag=XSS)
    out = tmp_path / "out"
    render(source, FAST, str(out))
    html = (out / "report.html").read_text()
    assert_inert(html)
    assert "&lt;script&gt;" in html  # shown, as text
    assert html.count("data:image/png;base64,") >= 5  # the run's own figures are embedded
    md = (out / "report.md").read_text()
    assert "<script>" not in md and not re.search(r"(?<!\\)\]\(javascript:", md)


def test_only_the_runs_own_figures_are_embedded(tmp_path):
    secret = tmp_path / "secret.png"
    secret.write_bytes(b"\x89PNG private")
    mine = tmp_path / "figures" / "speedup.png"
    mine.parent.mkdir()
    mine.write_bytes(b"\x89PNG mine")
    text = f"![speedup](figures/speedup.png)\n\n![x]({secret})\n\n<img src=\"{secret}\">\n\n![y](figures/../secret.png)"
    html = safe_html(text, {"figures/speedup.png": mine}, "t")
    assert html.count("data:image/png;base64,") == 1
    assert_inert(html)


def test_a_compared_folder_with_crafted_provenance_gives_inert_html(tmp_path):
    a = write_results(tmp_path / "a")
    b = write_results(tmp_path / "b", env={"cpu_model": XSS, "torch_version": XSS, "blas_env": {"X": XSS}})
    out = tmp_path / "cmp"
    write_comparison([a, b], FAST, str(out))
    assert_inert((out / "report.html").read_text())


def test_md_text_renders_as_exactly_its_text():
    for text in ["a*b*c", "[x](y)", "`code`", "a|b", "x_y and _z_", "<b>&amp;", "!\\[", "$1 {x}",
                 "https://x.example/p", "www.x.example", "WWW.X.EXAMPLE", "me@x.example", "ftp://a.b"]:
        html = safe_html(md_text(text), {}, "t")
        body = html.split("<body>")[1].split("</body>")[0].strip()
        shown = unescape(re.sub(r"</?p>", "", body)).replace("\u2060", "")  # the word joiner that breaks e-mails
        assert shown == text, (text, body)


# 2. Bounds

def test_a_bundle_that_unpacks_beyond_the_bound_is_refused_before_writing(tmp_path):
    bundle = tar_bundle(tmp_path / "bomb.tar.gz", {"environment.json": b"{}", "raw/big.json": b"0" * (3 * 2**20)})
    assert bundle.stat().st_size < 50_000
    with pytest.raises(BundleError, match="more than 1 MiB; bundle_limits.max_unpacked_mb") as error:
        unpack(bundle, tmp_path / "dest", max_unpacked_mb=1)
    one_line(error.value)
    assert not (tmp_path / "dest").exists()
    many = tar_bundle(tmp_path / "many.tar.gz", {"environment.json": b"{}", **{f"raw/{i}.json": b"{}" for i in range(20)}})
    with pytest.raises(BundleError, match="more than 10 files"):
        unpack(many, tmp_path / "dest", max_members=10)


def test_a_bundle_config_of_nested_aliases_or_tags_is_refused_at_once(tmp_path):
    folder = write_results(tmp_path / "m").folder
    aliases = "a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(
        f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True))
    (folder / "config.yaml").write_text(aliases)
    start = time.perf_counter()
    with pytest.raises(ConfigError, match=r"config.yaml \(the results folder's config.yaml\).*alias") as error:
        run_settings(Source("m", folder))
    assert time.perf_counter() - start < 5  # refused, not expanded (a bound, not a timing)
    one_line(error.value)
    (folder / "config.yaml").write_text("measure: !!python/object/apply:os.system ['true']\n")
    with pytest.raises(ConfigError, match="the results folder's config.yaml.*tag"):
        run_settings(Source("m", folder))
    (folder / "config.yaml").write_text("measure: {processes: many}\n")
    with pytest.raises(ConfigError, match="the results folder's config.yaml.*measure.processes"):
        run_settings(Source("m", folder))


def test_samples_per_record_are_bounded_by_its_max_samples(tmp_path):
    record = make_record(n=300)
    record["settings"] = {"max_samples": 200}
    path = write_record(tmp_path, record)
    with pytest.raises(MalformedRecord, match="300 samples, over its max_samples of 200"):
        load_record(path)
    record = make_record(n=10)
    record["samples_s"] = [1e-3] * 100_001
    path = write_record(tmp_path, record)
    with pytest.raises(MalformedRecord, match="samples_s"):
        load_record(path)


def test_free_text_is_bounded_by_its_schema(tmp_path):
    record = make_record(status="skipped", reason="x" * 2001)
    with pytest.raises(MalformedRecord, match=r"p1.json: malformed record at reason: holds 2001 characters, over the "
                                              "maxLength of 2000 this field may hold") as error:
        load_record(write_record(tmp_path, record))
    one_line(error.value)
    record = make_record()
    record["diagnostics"]["flags"] = ["bimodal"] * 101
    with pytest.raises(MalformedRecord, match=r"at diagnostics.flags: holds 101 items, over the maxItems of 100"):
        load_record(write_record(tmp_path, record))


def test_the_bootstrap_memory_does_not_grow_with_samples_times_resamples():
    samples = np.random.default_rng(0).lognormal(-7, 0.1, 150_000)
    tracemalloc.start()
    stats.draws([samples], 400, seed=1)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    unbounded = 400 * samples.size * 8 * 2  # indices and the values they pick, all at once
    assert peak < 0.25 * unbounded, f"peak {peak / 2**20:.0f} MiB"


def test_bootstrap_blocks_give_the_same_draws(monkeypatch):
    groups = [np.random.default_rng(2).random(500), np.random.default_rng(3).random(300)]
    whole = stats.draws(groups, 100, seed=5)
    monkeypatch.setattr(stats, "BOOTSTRAP_BLOCK_ELEMENTS", 1000)
    blocks = stats.draws(groups, 100, seed=5)
    assert np.array_equal(whole.two_level, blocks.two_level)


# 3. Schemas: one line, never a traceback

@pytest.mark.parametrize("field, value", [("gpus", "abc"), ("memory_bytes", "NaN"), ("fingerprint", "x"),
                                          ("logical_cores", -3), ("devices", ["cuda"])])
def test_a_bad_environment_is_one_line_in_render_and_compare(tmp_path, field, value):
    source = write_results(tmp_path / "m")
    env = json.loads((source.folder / "environment.json").read_text())
    env[field] = value
    text = json.dumps(env).replace('"NaN"', "NaN")
    (source.folder / "environment.json").write_text(text)
    for action in (lambda: render(Source("m", source.folder), FAST, str(tmp_path / "r")),
                   lambda: write_comparison([write_results(tmp_path / "a"), Source("m", source.folder)], FAST,
                                            str(tmp_path / "c"))):
        with pytest.raises(SourceError, match="environment.json") as error:
            action()
        one_line(error.value)


def test_a_bad_round_record_is_one_line(tmp_path):
    source = write_results(tmp_path / "m")
    (source.raw / "rounds").mkdir()
    (source.raw / "rounds" / "round-1.json").write_text(json.dumps({"kind": "round", "round": "one", "advice": 3}))
    with pytest.raises(SourceError, match=r"rounds/round-1.json: malformed round record") as error:
        render(source, FAST, str(tmp_path / "r"))
    one_line(error.value)


def test_a_record_whose_fingerprint_is_text_is_one_line(tmp_path):
    record = make_record()
    record["provenance"]["fingerprint"] = "x"
    path = write_record(tmp_path, record)
    with pytest.raises(MalformedRecord, match="provenance.fingerprint") as error:
        load_cells([path], Environment.from_json({"fingerprint": FINGERPRINT}))
    one_line(error.value)


def test_a_device_name_with_mathtext_is_drawn_literally(tmp_path):
    source = write_results(tmp_path / "m", device_name=r"GPU $\frac{1}{$ broken")
    render(source, FAST, str(tmp_path / "r"))
    assert (tmp_path / "r" / "figures" / "heatmap.png").stat().st_size > 0


@pytest.mark.parametrize("name", ["...", "my results", "a$b"])
def test_a_folder_or_bundle_that_cannot_be_a_label_is_one_line(tmp_path, name):
    folder = write_results(tmp_path / name).folder
    with pytest.raises(BundleError, match="cannot be a machine label .*a label starts with") as error:
        resolve_sources([str(folder)], str(tmp_path / "results"), [], "compare")
    one_line(error.value)
    bundle = tmp_path / f"{name}.tar.gz"
    bundle.write_bytes(b"")
    with pytest.raises(BundleError, match="cannot be a machine label"):
        resolve_sources([str(bundle)], str(tmp_path / "results"), [], "compare")


def test_a_bundle_with_environment_json_in_a_subfolder_is_refused(tmp_path):
    bundle = tar_bundle(tmp_path / "m.tar.gz", {"sub/environment.json": b"{}", "raw/x.json": b"{}"})
    with pytest.raises(BundleError, match="environment.json at its top"):
        unpack(bundle, tmp_path / "dest")
    assert not (tmp_path / "dest").exists()


# 4. Reports claim only what the data support

def test_an_ok_record_whose_check_failed_is_an_error_never_a_speedup(tmp_path):
    source = write_results(tmp_path / "m")
    for path in (source.raw / "matmul" / "torch-cpu-float32-n512-t1").glob("p*.json"):
        record = json.loads(path.read_text())
        record["check"] = {"rel_err": 0.97, "tolerance": 1e-5, "passed": True}
        path.write_text(json.dumps(record))
    tables = source.tables(FAST)
    row = tables["timings"].query("library == 'torch' and size == 512 and device == 'cpu'").iloc[0]
    assert row["status"] == "error" and "failed the correctness check (relative error 0.97" in row["reason"]
    assert tables["speedups"].query("size == 512 and library == 'torch'").empty


def test_one_measurement_stored_in_two_formats_is_refused(tmp_path):
    record = make_record()
    v2 = write_record(tmp_path, record)
    v1 = v2.parent.with_suffix(".json")
    v1.write_text(json.dumps({**record, "schema_version": 1}))
    with pytest.raises(MalformedRecord, match="same cell and process") as error:
        load_cells([v2, v1], Environment.from_json({"fingerprint": FINGERPRINT}))
    assert str(v1) in str(error.value) and str(v2) in str(error.value)


def test_samples_below_the_timer_resolution_are_refused(tmp_path):
    record = make_record()
    record["samples_s"] = [1e-300] * len(record["samples_s"])
    with pytest.raises(MalformedRecord, match="below the timer's resolution"):
        load_record(write_record(tmp_path, record))


def test_the_method_states_the_processes_the_records_hold(tmp_path):
    import pandas as pd

    assert processes_held(pd.DataFrame({"status": ["ok"] * 3, "processes": [1, 1, 1]})) == \
        "each measured cell was measured in one process"
    assert processes_held(pd.DataFrame({"status": ["ok"] * 3, "processes": [3, 3, 1]})) == \
        "2 cells were measured in 3 processes, 1 cell in 1 process"
    out = tmp_path / "h200"
    render(Source("h200", ROOT / "tests" / "data" / "h200"), FAST, str(out))
    method = (out / "report.md").read_text().split("## Method")[1]
    assert "each measured cell was measured in one process" in method
    assert "3 independent processes" not in method
    assert "predate recorded thresholds" in method  # measured before the rounds recorded their thresholds
    assert "beyond 20% and 4 times" in method and "spans more than 2×" in method  # this code's analysis, rebuilt


def test_a_corrupt_record_names_the_whole_way_back(tmp_path):
    raw = tmp_path / "results" / "m" / "raw"
    path = write_record(raw.parent, make_record(round=2, rounds=2))
    (raw / "rounds").mkdir(parents=True)
    (raw / "rounds" / "p2.json").write_text("{}")
    path.write_text("{not json")
    with pytest.raises(MalformedRecord) as error:
        load_record(path)
    assert f"delete it and {raw / 'rounds' / 'p2.json'}, then run again" in one_line(error.value)


def test_a_replaced_bundle_with_an_older_mtime_is_unpacked_again(tmp_path):
    """Through Snakemake: freshness by content, not by mtime (scp -p, rsync -a)."""
    from offloadbench import sandbox

    bundles = []
    for host in ("first", "second"):
        folder = write_results(tmp_path / host)
        env = json.loads((folder.folder / "environment.json").read_text())
        (folder.folder / "environment.json").write_text(json.dumps({**env, "hostname": host}))
        bundles.append(tmp_path / f"{host}.tar.gz")
        make_bundle(folder.folder, bundles[-1], "lab", "{}\n")
    target = tmp_path / "lab.tar.gz"
    os.replace(bundles[0], target)
    workdir = sandbox.copy_workflow(tmp_path / "wd")
    environment = "results/sources/lab/environment.json"
    config = {"render": [str(target)]}
    first = sandbox.snakemake(workdir, environment, config=config, timeout=300)
    assert first.returncode == 0, first.stderr[-2000:]
    assert json.loads((workdir / environment).read_text())["hostname"] == "first"
    old = time.time() - 3600
    os.replace(bundles[1], target)
    os.utime(target, (old, old))
    again = sandbox.snakemake(workdir, environment, config=config, timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    assert json.loads((workdir / environment).read_text())["hostname"] == "second"


# 7. The lock

def test_the_lock_refuses_a_planted_link_and_creates_a_private_file(tmp_path):
    target = tmp_path / "victim"
    link = tmp_path / "lock"
    link.symlink_to(target)
    with pytest.raises(LockError, match="symbolic link") as error, host_lock(link):
        pass
    one_line(error.value)
    assert not target.exists()
    path = tmp_path / "real.lock"
    with host_lock(path):
        assert oct(path.stat().st_mode & 0o777) == "0o644"
        assert json.loads(path.read_text())["pid"] == os.getpid()


def test_a_waiting_run_names_the_holder_and_gives_up_at_its_limit(tmp_path, monkeypatch):
    from offloadbench.jobs import lock

    monkeypatch.setattr(lock, "REPORT_EVERY_S", 0.2)
    path = tmp_path / "lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", ("import sys, time; sys.path.insert(0, 'workflow');"
                                "from offloadbench.jobs.lock import host_lock\n"
                                f"with host_lock({str(path)!r}, label='other run, round 1'):\n"
                                " print('held', flush=True); time.sleep(30)")],
        cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        lines = []
        with pytest.raises(LockError, match=f"gave up after .* held by pid {holder.pid} .*other run, round 1") as error, \
                host_lock(path, timeout_s=1.0, say=lines.append):
            pass
        one_line(error.value)
        assert lines and all(f"pid {holder.pid}" in line and "other run, round 1" in line for line in lines)
    finally:
        holder.kill()
        holder.wait()


# 8. Round two: one escaping rule per output, every bound named, finite numbers, regular files

def sources_of(case: crafted.Case, tmp: Path, **limits) -> list[Source]:
    """The case's sources as render and compare get them: a bundle unpacked, a folder as it is."""
    found = []
    for path in case.sources:
        if path.name.endswith(".tar.gz"):
            label = path.name.removesuffix(".tar.gz")
            found.append(Source(label, unpack(path, tmp / "sources" / label), **limits))
        else:
            found.append(Source(path.name, path, **limits))
    return found


def run_case(case: crafted.Case, tmp: Path, **limits) -> Path:
    out = tmp / "out"
    sources = sources_of(case, tmp, **limits)
    if case.action == "render":
        render(sources[0], FAST, str(out))
    else:
        write_comparison(sources, FAST, str(out))
    return out


def printed(action, log: Path, capfd) -> str:
    """What a job that fails with `action` prints to the terminal (run_logged, as the rules run it)."""
    capfd.readouterr()
    with pytest.raises(SystemExit):
        run_logged(str(log), action)
    text = capfd.readouterr().err
    assert crafted.printed_problems(text) == [], text
    return text


@pytest.mark.parametrize("build", [crafted.markdown_key_link, crafted.markdown_bare_url, crafted.csv_formulas,
                                   crafted.csv_carriage_return, crafted.latex_controls], ids=lambda b: b.__name__)
def test_text_from_data_is_inert_in_every_output(tmp_path, build):
    out = run_case(build(tmp_path / "case"), tmp_path)
    assert sorted(p.suffix for p in out.glob("*.*")) and crafted.output_problems(out) == []
    assert list(out.rglob("*.tex")) and list(out.glob("*.csv"))


def test_a_key_with_links_is_shown_as_text(tmp_path):
    out = run_case(crafted.markdown_key_link(tmp_path / "case"), tmp_path)
    md, html = (out / "report.md").read_text(), (out / "report.html").read_text()
    assert "OPENBLAS_NUM_THREADS=" in md and r"\[phish\]" in md
    assert "[phish](https://evil.example/p)" in unescape(re.sub(r"<[^>]+>", "", html))  # as text
    assert_inert(html)


def test_csv_cells_read_back_as_they_were_and_row_for_row(tmp_path):
    from offloadbench.analysis.tables import read_table

    for build, expected in ((crafted.csv_formulas, crafted.FORMULAS[0]), (crafted.csv_carriage_return, "fine =1+1")):
        case = build(tmp_path / build.__name__)
        folder = unpack(case.sources[-1], tmp_path / build.__name__ / "unpacked")
        out = tmp_path / build.__name__ / "out"
        render(Source("x", folder), FAST, str(out))
        timings = read_table("timings", str(out / "timings.csv"))
        assert len(timings) == len(Source("x", folder).tables(FAST)["timings"])  # no row from a CR
        assert expected in set(timings["reason"].dropna())
        assert not crafted.FORMULA_CELL.search((out / "timings.csv").read_text())


@pytest.mark.parametrize("text, cell", [
    ("=1+1", "'=1+1"), ("+cmd|' /C calc'!A0", "'+cmd|' /C calc'!A0"), ("@SUM(1+1)", "'@SUM(1+1)"),
    ("-2+3", "'-2+3"), ("\t=1", "' =1"), ("\r=1", "' =1"), (" =1", "' =1"), ("\tplain", "' plain"),
    ("-5", "-5"), ("+1.5e3", "+1.5e3"), ("-0.25", "-0.25"), ("a\rb\nc\x1bd", "a b c d"), ("x=1", "x=1"), ("", ""),
])
def test_the_csv_rule(text, cell):
    from offloadbench.csvsafe import csv_cell

    assert csv_cell(text) == cell


def test_tex_escape_leaves_no_control_character():
    from offloadbench.report.escape import tex_escape

    text = tex_escape(crafted.CONTROLS + crafted.ESCAPES + "\x00\x08\x0b\x0c")
    assert not re.search(r"[\x00-\x1f\x7f]", text) and "red nul del" in text and "error: forged" in text


def test_names_from_data_reach_the_terminal_escaped_with_advice_that_fits(tmp_path, capfd):
    case = crafted.terminal_member_name(tmp_path / "member")
    text = printed(lambda: run_case(case, tmp_path / "member"), tmp_path / "a.log", capfd)
    assert "refusing" in text and r"\x1b]0;owned\x07" in text and r"\nerror: forged" in text
    folder = crafted.write_results(tmp_path / "folder")
    bad = folder / "raw" / "matmul" / crafted.ESCAPES / "p1.json"
    bad.parent.mkdir()
    bad.write_text("{not json")
    text = printed(lambda: render(Source("folder", folder), FAST, str(tmp_path / "f")), tmp_path / "b.log", capfd)
    assert text.startswith(f"error: results folder {folder}: '") and "delete it and run again" in text
    case = crafted.terminal_bundle_advice(tmp_path / "advice")
    text = printed(lambda: run_case(case, tmp_path / "advice"), tmp_path / "c.log", capfd)
    assert text.startswith(f"error: bundle {case.sources[0]}: ") and "make the bundle again" in text
    assert "delete it" not in text


def schema_nodes(node, where="$"):
    """Every sub-schema of a schema, with where it is."""
    if isinstance(node, dict):
        yield where, node
        for key, value in node.items():
            yield from schema_nodes(value, f"{where}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from schema_nodes(value, f"{where}[{i}]")


@pytest.mark.parametrize("name", ["record", "environment", "round", "settle", "roofs", "transfer"])
def test_every_text_list_and_map_of_a_schema_is_bounded(name):
    import yaml

    schema = yaml.safe_load((ROOT / "workflow" / "schemas" / f"{name}.schema.yaml").read_text())
    for where, node in schema_nodes(schema):
        if where.endswith((".properties", ".$defs")):
            continue  # maps of names to sub-schemas, not schemas
        kinds = node.get("type", [])
        kinds = [kinds] if isinstance(kinds, str) else kinds
        if "string" in kinds:
            assert "maxLength" in node or "enum" in node, f"{name}: {where} is text without a maxLength"
        if "array" in kinds:
            assert "maxItems" in node, f"{name}: {where} is a list without a maxItems"
        if isinstance(node.get("additionalProperties"), dict) or ("object" in kinds and not node.get("properties")):
            assert "maxProperties" in node, f"{name}: {where} is a map without a maxProperties"
            assert "propertyNames" in node or "maxProperties" in node


@pytest.mark.parametrize("build, limit", [
    (crafted.long_reason, r"p1.json: reason holds 1048576 characters, over the 65536 any text may hold"),
    (crafted.copy_point_reason, r"cuda.json: points\[0\]\.reason holds \d+ characters, over the 65536 any text"),
    (crafted.copy_samples, r"points.0.samples_s: holds 250000 items, over the maxItems of 100000"),
    (crafted.cell_samples, r"its records hold more than 1000000 samples, over what bundle_limits.max_samples allows"),
    (crafted.big_environment, r"environment.json: 5\d MiB, over the 1 MiB"),
    (crafted.deep_folders, r"nested 1502 folders deep, over the 16 a bundle may have"),
    # numbers: refused before validation, naming file and field
    (crafted.overflow_memory, r"environment.json: memory_bytes is 1e400, not a finite number within 64 bits"),
    (crafted.overflow_size, r"p\d.json: cell.size is 100000000000000000000, not a finite number within 64 bits"),
    (crafted.overflow_copy_bytes, r"cuda.json: points\[0\].bytes is 10{23}…, not a finite number within 64 bits"),
    (crafted.overflow_samples, r"p1.json: malformed record at samples_s.0: 1e\+308 is over the maximum of 1e\+06"),
], ids=lambda v: getattr(v, "__name__", "limit"))
def test_each_bound_is_checked_before_any_work_and_named(tmp_path, build, limit):
    with pytest.raises(UserError, match=limit) as error:
        run_case(build(tmp_path / "case"), tmp_path)
    one_line(error.value)
    assert not (tmp_path / "out" / "figures").exists() or not list((tmp_path / "out" / "figures").iterdir())


def test_a_sources_samples_are_bounded_by_bundle_limits(tmp_path):
    from offloadbench.config import validate
    from offloadbench.records import samples_held

    folder = crafted.write_results(tmp_path / "m", transfer=crafted.make_transfer_record())
    cells = sum(samples_held(json.loads(p.read_text())) for p in (folder / "raw" / "matmul").glob("*/p*.json"))
    copies = samples_held(json.loads((folder / "raw" / "transfer" / "cuda.json").read_text()))
    assert validate({})["bundle_limits"]["max_samples"] == 1_000_000
    assert Source("m", folder, max_samples=cells + copies).cells(FAST)
    with pytest.raises(SourceError, match=r"^results folder .*: .*p\d.json: with it, its records and the "
                                          rf"{copies} samples of its copy sweeps and roofs hold more than "
                                          rf"{cells + copies - 1} samples, over what bundle_limits.max_samples allows"
                       ) as error:
        Source("m", folder, max_samples=cells + copies - 1).cells(FAST)
    one_line(error.value)
    with pytest.raises(SourceError, match="its copy sweeps and roofs hold more than 10 samples"):
        Source("m", folder, max_samples=10).cells(FAST)


def test_a_report_grows_in_proportion_to_its_data(tmp_path):
    base = tmp_path / "base"
    render(write_results(tmp_path / "m"), FAST, str(base))
    full = {"cpu_model": "c" * 10_000, "os": "o" * 10_000,
            "blas_env": {f"{'K' * 190}{i:03d}": "v" * 10_000 for i in range(90)}}
    folder = write_results(tmp_path / "full", env=full).folder
    assert 0.8 * 2**20 < (folder / "environment.json").stat().st_size < 2**20  # at the bound, within it
    render(Source("full", folder), FAST, str(tmp_path / "out"))
    grown = (tmp_path / "out" / "report.md").stat().st_size - (base / "report.md").stat().st_size
    assert grown < 3 * (folder / "environment.json").stat().st_size
    one_field = write_results(tmp_path / "one", env={"cpu_model": "c" * 10_000}).folder
    render(Source("one", one_field), FAST, str(tmp_path / "one-out"))
    assert (tmp_path / "one-out" / "report.md").stat().st_size - (base / "report.md").stat().st_size < 100_000


@pytest.mark.parametrize("number", ["1e400", "-1e400", "1" * 25, str(2**63), str(-(2**63) - 1), "NaN", "-Infinity"])
def test_json_numbers_are_finite_and_within_64_bits(tmp_path, number):
    from offloadbench.records import read_json

    path = tmp_path / "x.json"
    path.write_text(f'{{"a": {{"b": [1, {number}]}}}}')
    with pytest.raises(MalformedRecord, match=r"x.json: a.b\[1\] is .*, not a finite number within 64 bits"):
        read_json(path, hint=False)
    path.write_text(f'{{"a": {{"b": [1, {2**63 - 1}]}}}}')
    assert read_json(path, hint=False)["a"]["b"][1] == 2**63 - 1


@pytest.mark.parametrize("build, what", [(crafted.dev_zero, "a symbolic link"), (crafted.fifo, "a FIFO")],
                         ids=["dev_zero", "fifo"])
def test_special_files_in_a_results_folder_are_refused_without_reading(tmp_path, build, what):
    raised = without_blocking(lambda: run_case(build(tmp_path / "case"), tmp_path))
    assert isinstance(raised, SourceError) and f"p1.json: {what}; only regular files are read" in one_line(raised)


ROUND_RECORD = {"kind": "round", "round": 1, "processes": 3}
SETTLE_RECORD = {"kind": "settle", "extra_rounds": [], "undecided_at_start": [], "undecided_at_end": [], "stopped": "x"}


@pytest.mark.parametrize("special", ["link", "fifo"])
@pytest.mark.parametrize("relpath", ["environment.json", "raw/matmul/numpy-cpu-float32-n256-t1/p2.json",
                                     "raw/rounds/round-1.json", "raw/rounds/settle.json", "raw/transfer/cuda.json",
                                     "config.yaml"])
def test_every_reader_of_a_folder_takes_regular_files_only(tmp_path, relpath, special):
    folder = crafted.write_results(tmp_path / "m", transfer=crafted.make_transfer_record())
    (folder / "raw" / "rounds").mkdir()
    (folder / "raw" / "rounds" / "round-1.json").write_text(json.dumps(ROUND_RECORD))
    (folder / "raw" / "rounds" / "settle.json").write_text(json.dumps(SETTLE_RECORD))
    (folder / "config.yaml").write_text("{}\n")
    path = folder / relpath
    path.rename(tmp_path / "real")
    if special == "link":
        path.symlink_to(tmp_path / "real")
    else:
        os.mkfifo(path)
    raised = without_blocking(lambda: render(Source("m", folder), FAST, str(tmp_path / "out")))
    assert isinstance(raised, UserError), raised
    assert f"{path.name}: {'a symbolic link' if special == 'link' else 'a FIFO'}; only regular files" in one_line(raised)


def test_tables_read_back_are_regular_files_within_their_bound(tmp_path, monkeypatch):
    from offloadbench.analysis import tables

    real = tmp_path / "timings.csv"
    real.write_text("machine,op\nm,matmul\n")
    link = tmp_path / "link.csv"
    link.symlink_to(real)
    fifo = tmp_path / "fifo.csv"
    os.mkfifo(fifo)
    for path, why in ((link, "a symbolic link"), (fifo, "a FIFO")):
        raised = without_blocking(lambda path=path: tables.read_table("roofs", str(path)))
        assert isinstance(raised, MalformedRecord) and why in one_line(raised)
    monkeypatch.setattr(tables, "MAX_TABLE_BYTES", 10)
    with pytest.raises(MalformedRecord, match=r"timings.csv: 20 bytes, over the 10 bytes a table may hold"):
        tables.read_table("roofs", str(real))


def test_a_linked_folder_in_raw_is_refused(tmp_path):
    folder = crafted.write_results(tmp_path / "m")
    elsewhere = tmp_path / "elsewhere"
    (folder / "raw" / "matmul").rename(elsewhere)
    (folder / "raw" / "matmul").symlink_to(elsewhere)
    with pytest.raises(SourceError, match=r"raw/matmul is a symbolic link; only folders and regular files are read"):
        Source("m", folder).cells(FAST)


@pytest.mark.parametrize("depth, why", [(40, "nests deeper than the 32 levels"), (100_000, "nested too deeply")])
def test_deep_nesting_is_one_line(tmp_path, depth, why):
    record = make_record()
    path = write_record(tmp_path, record)
    path.write_text(json.dumps(record)[:-1] + ', "deep": ' + "[" * depth + "]" * depth + "}")
    with pytest.raises(MalformedRecord, match=why) as error:
        load_record(path)
    one_line(error.value)


def test_labels_that_spell_one_macro_are_one_line_naming_both(tmp_path):
    with pytest.raises(UserError, match=r"remote1 against ref and remote-1 against ref: their labels spell the same"
                       ) as error:
        run_case(crafted.macro_collision(tmp_path / "case"), tmp_path)
    one_line(error.value)


def test_every_csv_is_written_through_one_helper():
    """No table reaches a CSV file but through csvsafe.write_csv, whatever its name."""
    writers = [f"{p.relative_to(ROOT)}:{n}" for p in [*(ROOT / "workflow").rglob("*.py"), *(ROOT / "tools").rglob("*.py"),
                                                     *(ROOT / "benchmarks").rglob("*.py")]
               for n, line in enumerate(p.read_text().splitlines(), 1) if ".to_csv(" in line and p.name != "csvsafe.py"]
    assert writers == []
