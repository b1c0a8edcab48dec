"""The second security review's crafted bundles and results folders, one builder per case.

`tests/pipeline/test_untrusted.py` runs each case through `render` or the comparison and asserts
what must hold. The same cases also give the before/after table of the review, run through
the real pipeline of any checkout:

    PYTHONPATH=workflow .venv/bin/python tests/crafted.py <checkout> [case ...]

which prints, per case, how `snakemake render` (or `compare`) on it ended, in how long,
and what it left in its outputs that must not be there (a live link, a formula, a control
character). Each run is cut off after its case's `limit_s` and 4 GiB of memory.
"""

from __future__ import annotations

import io
import json
import os
import re
import resource
import signal
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conftest import FINGERPRINT, make_processes, make_record, make_transfer_record

PHISH = ('[phish](https://evil.example/p) ![t](https://evil.example/t.png) <img src=x onerror=alert(1)> '
         '[js](javascript:alert(1))')
BARE = "see https://evil.example/p or www.evil.example, or mail owner@evil.example"
FORMULAS = ['=HYPERLINK("https://evil.example","open")', "+cmd|' /C calc'!A0", "@SUM(1+1)", "-2+3*cmd"]
CARRIAGE = "fine\r=1+1"
CONTROLS = "GPU\x1b[31m red\x00 nul\x7f del\x1b]0;title\x07"
ESCAPES = "\x1b]0;owned\x07\x1b[31m\nerror: forged second line"
MIB = 2**20


def write_record(folder: Path, record: dict) -> Path:
    c = record["cell"]
    stem = f"{c['library']}-{c['device']}-{c['dtype']}-n{c['size']}-t{c['threads']}"
    path = folder / "raw" / c["op"] / stem / f"p{record['process']['round']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))
    return path


def write_results(folder: Path, env: dict | None = None, reason: str = "", flag: str = "",
                  device_name: str | None = None, transfer: dict | None = None) -> Path:
    """A small results folder: numpy and torch matmul on the cpu at two sizes, 3 processes
    each, one skipped cuda cell whose reason is `reason`, and a copy sweep (`transfer`)."""
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
    if transfer is not None:
        (folder / "raw" / "transfer").mkdir(parents=True, exist_ok=True)
        (folder / "raw" / "transfer" / f"{transfer['device']}.json").write_text(json.dumps(transfer))
    return folder


def tar_bundle(path: Path, members: dict[str, bytes], top: str = "m") -> Path:
    """A bundle of exactly these members (names under `top/`), however odd."""
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(f"{top}/{name}" if top else name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def files_of(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def bundle_of(folder: Path, out: Path) -> Path:
    """`folder` as the bundle `out` (its files under one top folder, as make bundle writes it)."""
    return tar_bundle(out, files_of(folder), top=folder.name)


def edit_json(path: Path, change: Callable[[dict], None]) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def first_record(folder: Path) -> Path:
    return next(iter(sorted((folder / "raw" / "matmul").glob("numpy-*/p1.json"))))


@dataclass
class Case:
    """One crafted input: what the review found, and the sources `action` runs on (for
    compare, a clean reference first)."""

    name: str
    problem: str
    action: str  # "render" or "compare"
    sources: list[Path]
    limit_s: float = 120.0  # where a run of it is cut off (the old code runs for ever on some)
    files: dict = field(default_factory=dict)  # for the checks: what the case planted


def reference(tmp: Path) -> Path:
    return write_results(tmp / "ref")


def markdown_key_link(tmp: Path) -> Case:
    bundle = bundle_of(write_results(tmp / "keylink", env={"blas_env": {PHISH: "1", "OPENBLAS_NUM_THREADS": PHISH}}),
                       tmp / "keylink.tar.gz")
    return Case("markdown_key_link", "a blas_env key with a link, an image, a handler reaches report.md/html",
                "render", [bundle])


def markdown_bare_url(tmp: Path) -> Case:
    bundle = bundle_of(write_results(tmp / "bareurl", env={"cpu_model": BARE, "os": BARE}, reason=BARE),
                       tmp / "bareurl.tar.gz")
    return Case("markdown_bare_url", "bare URLs in escaped text become links under GitHub Markdown", "render", [bundle])


def csv_formulas(tmp: Path) -> Case:
    folder = write_results(tmp / "formulas", env={"cpu_model": FORMULAS[2], "os": FORMULAS[0]},
                           reason=FORMULAS[0], flag=FORMULAS[1], device_name=FORMULAS[3])
    return Case("csv_formulas", "cells starting with = + - @ are written verbatim into every CSV", "compare",
                [reference(tmp), bundle_of(folder, tmp / "formulas.tar.gz")])


def csv_carriage_return(tmp: Path) -> Case:
    folder = write_results(tmp / "carriage", env={"cpu_model": CARRIAGE}, reason=CARRIAGE, flag=CARRIAGE)
    return Case("csv_carriage_return", "a bare CR is written unquoted: pandas reads back an extra row '=1+1'",
                "compare", [reference(tmp), bundle_of(folder, tmp / "carriage.tar.gz")])


def failed_sweep(reason: str) -> dict:
    """A copy sweep none of whose points was measured, each for `reason` (which the
    outputs then quote: "no copy was measured (…)")."""
    transfer = make_transfer_record()
    for point in transfer["points"]:
        point.update(status="error", reason=reason)
        point.pop("samples_s")
    return transfer


def latex_controls(tmp: Path) -> Case:
    transfer = failed_sweep(CONTROLS)
    transfer["device_name"] = CONTROLS
    folder = write_results(tmp / "controls", transfer=transfer, reason=CONTROLS, device_name=CONTROLS)
    return Case("latex_controls", "ESC, NUL and DEL pass tex_escape into tables/transfer.tex", "render",
                [bundle_of(folder, tmp / "controls.tar.gz")])


def terminal_member_name(tmp: Path) -> Case:
    folder = write_results(tmp / "escapes")
    members = files_of(folder)
    members[f"raw/matmul/{ESCAPES}/p1.json"] = b"{not json"
    return Case("terminal_member_name", "a member named with terminal escapes and a newline is printed raw",
                "render", [tar_bundle(tmp / "escapes.tar.gz", members, top="escapes")])


def terminal_bundle_advice(tmp: Path) -> Case:
    folder = write_results(tmp / "advice")
    first_record(folder).write_text("{not json")
    return Case("terminal_bundle_advice", "a bad record of a bundle is met with 'delete it … then run again'",
                "render", [bundle_of(folder, tmp / "advice.tar.gz")])


def long_reason(tmp: Path) -> Case:
    folder = write_results(tmp / "reason", reason="why " * (MIB // 4))
    return Case("long_reason", "a record's 1 MiB reason makes render take minutes (figure notes)", "render",
                [bundle_of(folder, tmp / "reason.tar.gz")], limit_s=300)


def copy_point_reason(tmp: Path) -> Case:
    folder = write_results(tmp / "copyreason", transfer=failed_sweep("copy " * (MIB // 5)))
    return Case("copy_point_reason", "a copy point's 1 MiB reason makes compare take minutes", "compare",
                [reference(tmp), bundle_of(folder, tmp / "copyreason.tar.gz")], limit_s=300)


def copy_samples(tmp: Path) -> Case:
    transfer = make_transfer_record()
    for point in transfer["points"][:8]:
        point["samples_s"] = [1e-4] * 250_000
    folder = write_results(tmp / "copysamples", transfer=transfer)
    return Case("copy_samples", "2 million copy samples (250,000 a point) in a small bundle", "render",
                [bundle_of(folder, tmp / "copysamples.tar.gz")], limit_s=300)


def at_ceiling(folder: Path, regions: int, per_region: int = 100_000) -> Path:
    """`folder` with `regions` timed regions (compute, then end to end) of its cpu cells
    holding `per_region` samples each."""
    paths = sorted((folder / "raw" / "matmul").glob("*-cpu-*/p*.json"))
    for k in range(regions):
        def fill(record: dict, k: int = k) -> None:
            samples = [1e-3 * (1 + 1e-4 * (i % 97 + k)) for i in range(per_region)]
            record["settings"] = {"max_samples": 100_000}
            if k < len(paths):
                record["samples_s"] = samples
            else:
                record["phases"]["end_to_end"] = {"samples_s": samples}
        edit_json(paths[k % len(paths)], fill)
    return folder


def cell_samples(tmp: Path) -> Case:
    folder = at_ceiling(write_results(tmp / "cellsamples"), regions=24)
    return Case("cell_samples", "24 regions of cell records at their 100,000-sample ceiling, 4 s each", "render",
                [bundle_of(folder, tmp / "cellsamples.tar.gz")], limit_s=300)


def big_environment(tmp: Path) -> Case:
    env = {"blas_env": {f"VAR{i:07d}": "v" * 10_000 for i in range(5500)}}  # 55 MB, compressing to little
    folder = write_results(tmp / "bigenv", env=env)
    return Case("big_environment", "a 55 MB environment.json gives a 110 MB report.md", "render",
                [bundle_of(folder, tmp / "bigenv.tar.gz")], limit_s=300)


def dev_zero(tmp: Path) -> Case:
    folder = write_results(tmp / "devzero")
    path = first_record(folder)
    path.unlink()
    path.symlink_to("/dev/zero")
    return Case("dev_zero", "a record that is a link to /dev/zero is read until memory runs out", "render",
                [folder], limit_s=120)


def fifo(tmp: Path) -> Case:
    folder = write_results(tmp / "fifo")
    path = first_record(folder)
    path.unlink()
    os.mkfifo(path)
    return Case("fifo", "a record that is a FIFO blocks the render forever", "render", [folder], limit_s=60)


def _overflow(tmp: Path, name: str, problem: str, action: str, change: Callable[[Path], None]) -> Case:
    folder = write_results(tmp / name, transfer=make_transfer_record())
    change(folder)
    sources = [bundle_of(folder, tmp / f"{name}.tar.gz")]
    return Case(name, problem, action, [reference(tmp), *sources] if action == "compare" else sources)


def _raw_number(path: Path, key: str, text: str) -> None:
    """Put `text` as the JSON number of `key` (json.dumps cannot write 1e400)."""
    data = path.read_text()
    path.write_text(re.sub(rf'"{key}": [^,}}]+', f'"{key}": {text}', data, count=1))


def overflow_memory(tmp: Path) -> Case:
    return _overflow(tmp, "memory1e400", "memory_bytes: 1e400 (read as infinity)", "compare",
                     lambda f: _raw_number(f / "environment.json", "machine", '"memory1e400", "memory_bytes": 1e400'))


def overflow_size(tmp: Path) -> Case:
    def change(folder: Path) -> None:
        for cell in (folder / "raw" / "matmul").glob("*-n512-*"):
            for path in cell.glob("p*.json"):
                _raw_number(path, "size", str(10**20))
            cell.rename(cell.with_name(cell.name.replace("-n512-", f"-n{10**20}-")))
    return _overflow(tmp, "size1e20", "a cell's size: 10**20", "render", change)


def overflow_copy_bytes(tmp: Path) -> Case:
    return _overflow(tmp, "bytes1e400", "a copy's bytes: 10**400", "render",
                     lambda f: _raw_number(f / "raw" / "transfer" / "cuda.json", "bytes", str(10**400)))


def overflow_samples(tmp: Path) -> Case:
    def change(folder: Path) -> None:
        for path in (folder / "raw" / "matmul").glob("*/p*.json"):
            edit_json(path, lambda r: r.update(samples_s=[1e308] * len(r["samples_s"])))
    return _overflow(tmp, "samples1e308", "every sample 1e308", "render", change)


def deep_folders(tmp: Path) -> Case:
    folder = write_results(tmp / "deep")
    members = files_of(folder)
    members["/".join(["d"] * 1500) + "/x.json"] = b"{}"
    return Case("deep_folders", "1,500-deep folders in a bundle", "render",
                [tar_bundle(tmp / "deep.tar.gz", members, top="deep")])


def macro_collision(tmp: Path) -> Case:
    return Case("macro_collision", "labels remote1 and remote-1 spell one LaTeX macro prefix", "compare",
                [reference(tmp), write_results(tmp / "remote1"), write_results(tmp / "remote-1")])


CASES = [markdown_key_link, markdown_bare_url, csv_formulas, csv_carriage_return, latex_controls,
         terminal_member_name, terminal_bundle_advice, long_reason, copy_point_reason, copy_samples, cell_samples,
         big_environment, dev_zero, fifo, overflow_memory, overflow_size, overflow_copy_bytes, overflow_samples,
         deep_folders, macro_collision]


# --- the largest inputs the bounds allow, to time render and compare at them ------------

def at_sample_budget(tmp: Path) -> Case:
    """Two bundles whose records hold just under bundle_limits.max_samples (1,000,000)
    each, every region at its 100,000-sample ceiling but for the warm-ups."""
    bundles = []
    for name in ("budget", "budget2"):
        folder = at_ceiling(write_results(tmp / name), regions=10, per_region=99_990)
        bundles.append(bundle_of(folder, tmp / f"{name}.tar.gz"))
    return Case("at_sample_budget", "1,000,000 samples (bundle_limits.max_samples)", "compare", bundles, limit_s=900)


def at_text_bounds(tmp: Path) -> Case:
    """Every record's reason at its maxLength, and each with 100 flags (maxItems) at theirs."""
    folder = write_results(tmp / "textbound")
    for k, path in enumerate(sorted((folder / "raw" / "matmul").glob("*/p*.json"))):
        edit_json(path, lambda r, k=k: (r.update(reason=f"reason {k} " + "r" * 1990),
                                        r["diagnostics"].update(flags=[f"flag {k} {i} " + "f" * 1985
                                                                       for i in range(100)])))
    return Case("at_text_bounds", "reasons and flags at their maxLength and maxItems", "compare",
                [reference(tmp), bundle_of(folder, tmp / "textbound.tar.gz")], limit_s=900)


def at_environment_bound(tmp: Path) -> Case:
    """environment.json just under its 1 MiB, its texts at their 10,000 characters."""
    env = {"cpu_model": "c" * 10_000, "os": "o" * 10_000, "torch_version": "t" * 10_000,
           "blas_env": {f"{'K' * 190}{i:03d}": "v" * 10_000 for i in range(95)}}
    folder = write_results(tmp / "envbound", env=env)
    return Case("at_environment_bound", "environment.json at 1 MiB", "compare",
                [reference(tmp), bundle_of(folder, tmp / "envbound.tar.gz")], limit_s=900)


def at_round_bounds(tmp: Path) -> Case:
    """Three round records with 100 pieces of advice (maxItems) of 10,000 characters each."""
    folder = write_results(tmp / "roundbound")
    (folder / "raw" / "rounds").mkdir()
    for k in (1, 2, 3):
        record = {"kind": "round", "round": k, "processes": 3, "advice": [f"advice {k} {i} " + "a" * 9985
                                                                       for i in range(100)]}
        (folder / "raw" / "rounds" / f"round-{k}.json").write_text(json.dumps(record))
    return Case("at_round_bounds", "round records at their bounds", "render",
                [bundle_of(folder, tmp / "roundbound.tar.gz")], limit_s=900)


AT_BOUNDS = [at_sample_budget, at_text_bounds, at_environment_bound, at_round_bounds]


# --- what must not be in an output or on the terminal ------------------------------------

LIVE_HTML = re.compile(r"<a\s[^>]*href=\"(?!#)|<script|<img\s(?![^>]*src=\"data:image/png;base64,)"
                       r"|<[a-z][^>]*\son\w+\s*=", re.IGNORECASE)
# A link in Markdown from data: [text](target) other than the report's own figures and
# anchors, a tag, or a bare URL/e-mail that GitHub's cmark-gfm would autolink.
LIVE_MARKDOWN = re.compile(r"(?<!\\)\]\((?!#|figures/)|<(?:img|script|a)\b|https?://|(?<![\w\\])www\.|\w@\w",
                           re.IGNORECASE)
FORMULA_CELL = re.compile(r"(?:^|,)\"?[=+@-](?![0-9.]+(?:[eE][+-]?\d+)?(?:,|\"|$))", re.MULTILINE)
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def output_problems(out: Path) -> list[str]:
    """What a render or comparison wrote that acts or breaks: a live link, script or handler
    in report.md/html, a formula or bare CR in a CSV, a control character in a .tex."""
    found = []
    for path in sorted(out.rglob("*")):
        if not path.is_file():
            continue
        if path.suffix == ".html":
            html = path.read_text(errors="replace")
            body = html.split("<body>", 1)[-1]
            found += [f"{path.name}: live {m!r}" for m in _distinct(LIVE_HTML, body, 30)]
        elif path.suffix == ".md":
            found += [f"{path.name}: live {m!r}" for m in _distinct(LIVE_MARKDOWN, path.read_text(), 30)]
            if path.stat().st_size > 4 * MIB:
                found.append(f"{path.name}: {path.stat().st_size / MIB:.0f} MiB")
        elif path.suffix == ".csv":
            data = path.read_bytes()
            if b"\r" in data:
                found.append(f"{path.name}: a bare CR")
            if re.search(rb"(^|,)-?inf(,|$)", data, re.MULTILINE):
                found.append(f"{path.name}: a number overflowed to inf")
            found += [f"{path.name}: formula {m!r}" for m in _distinct(FORMULA_CELL, data.decode(), 12)]
        elif path.suffix == ".tex":
            found += [f"{path.name}: control character {m!r}" for m in _distinct(CONTROL, path.read_text(), 1)]
    return found


def _distinct(pattern: re.Pattern, text: str, width: int, most: int = 3) -> list[str]:
    """The first few different matches of `pattern` in `text`, each cut to `width`."""
    return list(dict.fromkeys(m.group(0)[:width] for m in pattern.finditer(text)))[:most]


def printed_problems(text: str) -> list[str]:
    """What the terminal must never get: a control character, a traceback, or more than one error line."""
    found = [f"control character {c!r}" for c in sorted(set(CONTROL.findall(text)))]
    if "Traceback" in text:
        found.append("a traceback")
    errors = [line for line in text.splitlines() if line.startswith("error:")]
    if len(errors) > 1:
        found.append(f"{len(errors)} error: lines")
    return found


def without_blocking(action: Callable[[], object]) -> BaseException | None:
    """`action` run in a thread: what it raised, or None. One still blocked after a generous
    while (a FIFO opened for reading) is a failure; a guard against hanging, not a timing."""
    outcome: dict = {}

    def run() -> None:
        try:
            action()
            outcome["raised"] = None
        except Exception as error:  # noqa: BLE001 - handed to the test
            outcome["raised"] = error

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(60)
    assert not worker.is_alive(), "blocked on a special file"
    return outcome["raised"]


# --- the pipeline run of each case, for the review's table ------------------------------

def pipeline_run(case: Case, checkout: Path, work: Path) -> dict:
    """`snakemake render` or `compare` of the checkout on the case, cut off at its limits."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow"))
    from offloadbench import sandbox

    workdir = sandbox.copy_workflow(work / f"wd-{case.name}", Path(checkout))
    (workdir / "case.yaml").write_text(json.dumps({case.action: [str(s) for s in case.sources]}))
    cmd = [sys.executable, "-m", "snakemake", "--cores", "1", case.action, "--configfile", "case.yaml"]

    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            errors="replace", start_new_session=True,
                            env={**os.environ, "PATH": sandbox.interpreter_path()})
    resource.prlimit(proc.pid, resource.RLIMIT_AS, (4 * 2**30, 4 * 2**30))  # its jobs inherit it
    try:
        printed, _ = proc.communicate(timeout=case.limit_s)
        ended = "ok" if proc.returncode == 0 else "failed"
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        printed, _ = proc.communicate()
        ended = f"still running after {case.limit_s:.0f} s, killed"
    seconds = time.perf_counter() - start
    logs = "".join(p.read_text(errors="replace") for p in (workdir / "results" / "logs").rglob("*.log"))
    errors = [line for line in printed.splitlines() if line.startswith("error:")]
    if ended == "failed":
        if "Traceback" in logs + printed:
            after = (logs + printed).split("Traceback (most recent call last):", 1)[1]
            raised = re.search(r"^([A-Za-z_][\w.]*(?:Error|Exception|Collision))\b", after, re.MULTILINE)
            ended = f"traceback ({raised.group(1) if raised else 'see the log'})"
        elif "MemoryError" in logs or "Killed" in printed:
            ended = "out of memory"
        elif errors:
            ended = f"one line: {errors[0][:150]}"
    outputs = output_problems(workdir / "results" / ("compare" if case.action == "compare" else "rendered"))
    return {"case": case.name, "ended": ended, "seconds": seconds, "outputs": outputs,
            "printed": printed_problems(printed)}


def main(argv: list[str]) -> int:
    """`<checkout> [--as render|compare] [case ...]`: the review's cases, or those named
    (the AT_BOUNDS ones only when named), each run as its own action or as the one given."""
    import tempfile
    from dataclasses import replace

    action = argv[argv.index("--as") + 1] if "--as" in argv else None
    words = [w for i, w in enumerate(argv) if w != "--as" and (i == 0 or argv[i - 1] != "--as")]
    checkout, names = Path(words[0]).resolve(), set(words[1:])
    with tempfile.TemporaryDirectory(prefix="crafted-") as tmp:
        for build in CASES + AT_BOUNDS:
            if build in AT_BOUNDS and build.__name__ not in names or names and build.__name__ not in names:
                continue
            case = build(Path(tmp) / build.__name__)
            if action == "render":
                case = replace(case, action="render", sources=case.sources[-1:])
            elif action == "compare" and case.action == "render":
                case = replace(case, action="compare", sources=[reference(Path(tmp) / build.__name__), *case.sources])
            result = pipeline_run(case, checkout, Path(tmp) / "runs")
            left = "; ".join(result["outputs"] + [f"printed: {p}" for p in result["printed"]]) or "nothing"
            print(f"| {case.name} ({case.action}) | {result['ended']} | {result['seconds']:.0f} s | {left} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
