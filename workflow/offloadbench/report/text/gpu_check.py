"""The GPU check's verdict on one screen: what `make gpu-check` found on a GPU (or on the
stand-in GPU, `make gpu-check STANDIN=1`), in the same format either way.

    python -m offloadbench.report.text.gpu_check results/gpu-check --tests pytest-gpu.xml --took-s 250 --budget-s 480

It passes when:
- every GPU test passed, none skipped (the check is for its GPU);
- every op has an ok cell on cuda, in both modes, with a compiled CPU cell and a user
  kernel numpy-compiled on cuda among the ok cells, and no cell failed;
- no launcher that forks had CUDA up: those of CPU workers hid the GPUs, none refused a
  fork, and no cell met "Cannot re-initialize CUDA";
- the whole check took at most its budget; and where it is a rehearsal on the stand-in, its
  phases with the budgets of those only a real host has (CUDA's first import, cold Triton
  compiles) come to at most a real host's budget, 8 minutes.
It prints the versions the check ran with (a lent host's own, where they differ from the pins)
and each phase's time.
The inputs are read as untrusted: the tables and records through the project's bounded,
schema-checked readers, the test report with a size limit.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path
from xml.etree import ElementTree

from ... import layout, libraries
from ...catalogue import KERNEL_FAMILY
from ...cells import COMPILED, EAGER
from ...errors import UserError, one_line
from ...reading import read_regular
from ...units import fmt_duration
from ..format import count_of

REINIT = "Cannot re-initialize CUDA"
MAX_REPORT_BYTES = 8 * 2**20
REAL_HOST_BUDGET_S = 480.0
VERSIONS = ("torch", "numpy", "pandas", "matplotlib", "seaborn", "snakemake", "pytest")


def versions_line() -> str:
    """"Python 3.12.3, torch 2.11.0, …": what this check ran with."""
    import platform
    from importlib import metadata

    found = [f"Python {platform.python_version()}"]
    for name in VERSIONS:
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            found.append(f"{name} missing")
    return ", ".join(found)


def read_phases(path: Path) -> list[tuple[str, float]]:
    """phases.txt's lines, "name seconds" each (bounded: a few short lines)."""
    found = []
    for line in read_regular(path, 64 * 1024, "the phases' times").decode("utf-8", "replace").splitlines()[:50]:
        name, _, seconds = line.strip().rpartition(" ")
        try:
            found.append((name[:40], float(seconds)))
        except ValueError:
            continue
    return found


@dataclass
class Verdict:
    """Each check's line, and the problems that fail the check."""

    lines: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def check(self, ok: bool, line: str, problem: str) -> None:
        self.lines.append(f"{'ok  ' if ok else 'FAIL'} {line}")
        if not ok:
            self.problems.append(problem)


def test_counts(report: Path) -> dict[str, int]:
    """passed, failed, skipped of a pytest JUnit report (`--junitxml`)."""
    root = ElementTree.fromstring(read_regular(report, MAX_REPORT_BYTES, "the GPU tests' report"))
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    for case in root.iter("testcase"):
        kinds = {child.tag for child in case}
        counts["failed" if kinds & {"failure", "error"} else "skipped" if "skipped" in kinds else "passed"] += 1
    return counts


def judge(results: Path, tests: Path | None, took_s: float | None, budget_s: float,
          phases: list[tuple[str, float]] = (), real_only: dict[str, float] | None = None) -> Verdict:
    from ...analysis.tables import read_table
    from ...records import load_environment, load_round

    verdict = Verdict()
    environment = load_environment(results / "environment.json")
    gpu = next((g for g in environment.gpus if g.pci_bus_id), None)
    where = f"{gpu.name} (CUDA {gpu.cuda_index}, PCI {gpu.pci_bus_id}, NVML {gpu.nvml_index})" if gpu else "none"
    verdict.lines.append(f"GPU: {where}{' (the stand-in)' if environment.standin_gpu else ''} | "
                         f"torch {environment.torch_version} | CPU {environment.cpu_model}")
    if tests is not None:
        counts = test_counts(tests)
        verdict.check(counts["failed"] == 0 and counts["skipped"] == 0 and counts["passed"] > 0,
                      f"GPU tests: {counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped",
                      "a GPU test failed or skipped (pytest-gpu.log)")
    timings = read_table("timings", str(results / "timings.csv"))
    failed = timings[timings["status"].isin(["error", "oom", "timeout"])]
    reinit = failed[failed["reason"].astype(str).str.contains(REINIT, regex=False)]
    verdict.check(failed.empty, f"cells: {len(timings)} in the grid, {int((timings['status'] == 'ok').sum())} ok, "
                  f"{len(failed)} failed", f"{count_of(len(failed), 'cell')} failed: "
                  + "; ".join(one_line(f"{r.op} {r.library} {r.device} {r.mode}: {r.reason}", 120)
                              for r in failed.head(3).itertuples()))
    ok = timings[timings["status"] == "ok"]
    gpu_ok = ok[ok["device"] == "cuda"]
    missing = sorted(set(timings["op"]) - set(gpu_ok["op"]))
    verdict.check(not missing, f"every op ok on cuda ({gpu_ok['op'].nunique()} ops)",
                  f"no ok cuda cell of {', '.join(missing[:5])}")
    modes = set(gpu_ok["mode"])
    verdict.check({EAGER, COMPILED} <= modes, f"both modes on cuda ({', '.join(sorted(modes))})",
                  "cuda lacks an eager or a compiled cell")
    compiled_cpu = ok[(ok["device"] == "cpu") & (ok["mode"] == COMPILED)]
    verdict.check(not compiled_cpu.empty, f"compiled CPU cells ok: {len(compiled_cpu)}", "no compiled CPU cell is ok")
    kernels = ok[(ok["device"] == "cuda") & (ok["library"] == libraries.BASELINE) & (ok["mode"] == COMPILED)
                 & (ok["family"] == KERNEL_FAMILY)]
    verdict.check(not kernels.empty, f"a kernel numpy-compiled on cuda: {', '.join(sorted(set(kernels['op']))) or 'none'}",
                  "no user kernel numpy-compiled on cuda is ok")
    launchers = [launcher for kind in ("planned", "extra") for path in layout.round_records(results / "raw", kind)
                 for launcher in load_round(path).launchers]
    exposed = sorted({str(launcher.get("imports")) for launcher in launchers
                      if launcher.get("imports") != "gpu" and not launcher.get("gpus_hidden")})
    refused = sum(len(launcher.get("refused") or ()) for launcher in launchers)
    verdict.check(not exposed and not refused and reinit.empty,
                  f"no forking launcher had CUDA up ({len(launchers)} launchers; CPU ones hid the GPUs; "
                  f"{refused} forks refused; {len(reinit)} cells met '{REINIT}')",
                  f"CUDA was up before a fork (launchers seeing the GPU: {', '.join(exposed) or 'none'})")
    if took_s is not None:
        verdict.check(took_s <= budget_s, f"took {fmt_duration(took_s)} (budget {fmt_duration(budget_s)})",
                      f"the check took longer than {fmt_duration(budget_s)}")
    verdict.lines.append(f"versions: {versions_line()}")
    if phases:
        verdict.lines.append("phases: " + ", ".join(f"{name} {fmt_duration(s)}" for name, s in phases))
    if real_only:
        projected = sum(s for _, s in phases) + sum(real_only.values())
        verdict.check(projected <= REAL_HOST_BUDGET_S,
                      f"on a real host about {fmt_duration(projected)} of {fmt_duration(REAL_HOST_BUDGET_S)}: these "
                      "phases and the budgets of those only a real host has ("
                      + ", ".join(f"{name} {fmt_duration(s)}" for name, s in real_only.items()) + ")",
                      f"its phases and a real host's own would take longer than {fmt_duration(REAL_HOST_BUDGET_S)}")
    return verdict


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The GPU check's verdict, from its results folder.")
    parser.add_argument("results", help="the check's results/<machine> folder")
    parser.add_argument("--tests", help="the GPU tests' JUnit report")
    parser.add_argument("--took-s", type=float)
    parser.add_argument("--budget-s", type=float, default=REAL_HOST_BUDGET_S)
    parser.add_argument("--phases", help="phases.txt: each phase's seconds so far")
    parser.add_argument("--real-only", nargs="*", default=(), metavar="NAME:SECONDS",
                        help="a rehearsal: the budgets of the phases only a real host has")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        real_only = {name: float(seconds) for name, _, seconds in (item.partition(":") for item in args.real_only)}
        verdict = judge(Path(args.results), Path(args.tests) if args.tests else None, args.took_s, args.budget_s,
                        read_phases(Path(args.phases)) if args.phases else [], real_only)
    except (UserError, OSError, ElementTree.ParseError, KeyError, ValueError) as error:
        print(f"gpu-check: FAIL: {one_line(str(error), 300)}")
        return 1
    print(f"gpu-check: {'PASS' if not verdict.problems else 'FAIL'}")
    print("\n".join(verdict.lines))
    for problem in verdict.problems:
        print(f"  - {one_line(problem, 300)}")
    return 0 if not verdict.problems else 1


if __name__ == "__main__":
    sys.exit(main())
