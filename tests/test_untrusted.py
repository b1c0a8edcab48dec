"""Results from other machines are untrusted input: each crafted case of the review, as a
test. No traceback, no unescaped string in HTML, bounded unpacking and reading, and no
speedup from a result that failed its check."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import tarfile
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from conftest import FINGERPRINT, make_processes, make_record
from offloadbench import stats
from offloadbench.analysis.measured import Analysis, load_cells
from offloadbench.analysis.sources import Source, SourceError
from offloadbench.bundles import BundleError, make_bundle, resolve_sources, unpack
from offloadbench.config import ConfigError
from offloadbench.jobs.lock import LockError, host_lock
from offloadbench.records import MalformedRecord, load_record
from offloadbench.report.escape import md_text, safe_html
from offloadbench.report.publish import render, run_settings, write_comparison
from offloadbench.report.text.markdown import processes_held

ROOT = Path(__file__).resolve().parents[1]
FAST = Analysis(resamples=200)
XSS = '<script>alert("x")</script><img src="/etc/secret.png" onerror=alert(1)>[link](javascript:alert(2))'


def write_results(folder: Path, env: dict | None = None, reason: str = "", flag: str = "", device_name: str | None = None) -> Source:
    """A small results folder: numpy and torch matmul on the cpu at two sizes, 3 processes
    each, and one skipped cell whose reason is `reason`."""
    environment = {"machine": folder.name, "hostname": "box", "fingerprint": dict(FINGERPRINT),
                   "cpu_model": "Test CPU", "logical_cores": 4, **(env or {})}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "environment.json").write_text(json.dumps(environment))
    records = []
    for i, size in enumerate((256, 512)):
        records += make_processes(3, seed=i, size=size, median=1e-3 * size / 256)
        records += make_processes(3, seed=10 + i, size=size, median=0.5e-3 * size / 256, library="torch")
    records.append(make_record(size=256, library="torch", device="cuda", status="skipped", reason=reason or "no GPU"))
    for record in records:
        if flag:
            record["diagnostics"]["flags"] = [flag]
        if device_name is not None:
            record["device"]["name"] = device_name
        write_record(folder, record)
    return Source(folder.name, folder)


def write_record(folder: Path, record: dict) -> Path:
    c = record["cell"]
    stem = f"{c['library']}-{c['device']}-{c['dtype']}-n{c['size']}-t{c['threads']}"
    path = folder / "raw" / c["op"] / stem / f"p{record['process']['round']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))
    return path


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
    write_comparison([a, b], FAST, 0.05, str(out))
    assert_inert((out / "report.html").read_text())


def test_md_text_renders_as_exactly_its_text():
    for text in ["a*b*c", "[x](y)", "`code`", "a|b", "x_y and _z_", "<b>&amp;", "!\\[", "$1 {x}"]:
        html = safe_html(md_text(text), {}, "t")
        body = html.split("<body>")[1].split("</body>")[0].strip()
        shown = re.sub(r"</?p>", "", body).replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
        assert shown == text, (text, body)


# 2. Bounds

def tar_bundle(path: Path, members: dict[str, bytes], top="m") -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(f"{top}/{name}" if top else name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


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
    with pytest.raises(ConfigError, match=r"config.yaml \(the bundle's config.yaml\).*alias") as error:
        run_settings(Source("m", folder))
    assert time.perf_counter() - start < 5  # refused, not expanded (a bound, not a timing)
    one_line(error.value)
    (folder / "config.yaml").write_text("measure: !!python/object/apply:os.system ['true']\n")
    with pytest.raises(ConfigError, match="the bundle's config.yaml.*tag"):
        run_settings(Source("m", folder))
    (folder / "config.yaml").write_text("measure: {processes: many}\n")
    with pytest.raises(ConfigError, match="the bundle's config.yaml.*measure.processes"):
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
                   lambda: write_comparison([write_results(tmp_path / "a"), Source("m", source.folder)], FAST, 0.05,
                                            str(tmp_path / "c"))):
        with pytest.raises(SourceError, match="environment.json") as error:
            action()
        one_line(error.value)


def test_a_bad_round_record_is_one_line(tmp_path):
    source = write_results(tmp_path / "m")
    (source.raw / "rounds").mkdir()
    (source.raw / "rounds" / "p1.json").write_text(json.dumps({"kind": "round", "round": "one", "advice": 3}))
    with pytest.raises(SourceError, match=r"rounds/p1.json: malformed round record") as error:
        render(source, FAST, str(tmp_path / "r"))
    one_line(error.value)


def test_a_record_whose_fingerprint_is_text_is_one_line(tmp_path):
    record = make_record()
    record["provenance"]["fingerprint"] = "x"
    path = write_record(tmp_path, record)
    with pytest.raises(MalformedRecord, match="provenance.fingerprint") as error:
        load_cells([path], {"fingerprint": FINGERPRINT})
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
        load_cells([v2, v1], {"fingerprint": FINGERPRINT})
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
        "the records hold 2 cells in 3 processes, 1 cells in 1 process"
    out = tmp_path / "h200"
    render(Source("h200", ROOT / "tests" / "data" / "h200"), FAST, str(out))
    method = (out / "report.md").read_text().split("## Method")[1]
    assert "each measured cell was measured in one process" in method
    assert "3 independent processes" not in method


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
