"""Paper tables and claim macros: checked as text, since no LaTeX is installed to compile them."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd
import pytest
from conftest import make_processes, make_transfer_record, tables_of
from offloadbench.analysis.columns import TRANSFER
from offloadbench.analysis.tables import read_tables
from offloadbench.report.escape import tex_comment, tex_escape
from offloadbench.report.format import fmt_ci, fmt_sig, time_unit
from offloadbench.report.table import booktabs_table
from offloadbench.report.text.latex import write_comparison_latex, write_latex
from offloadbench.report.text.latex_macros import (
    MacroCollision,
    Macros,
    camel_words,
    claims_macros,
    comparison_macros,
    machine_prefix,
    number_words,
    pair_prefix,
)
from offloadbench.report.text.latex_tables import comparison_tex, machine_tex
from offloadbench.verdicts import Judging

POLICY = Judging()

MACRO = re.compile(r"\\newcommand\{\\([A-Za-z]+)\}\{(.*)\}$")


def body_lines(tex: str) -> list[str]:
    """The source without its comment lines."""
    return [line for line in tex.splitlines() if not line.lstrip().startswith("%")]


def check_table(tex: str) -> list[list[str]]:
    """Assert the structure of one booktabs table float; return the rows of its tabular as cells."""
    assert tex.isascii()
    for rule in (r"\toprule", r"\midrule", r"\bottomrule"):
        assert tex.count(rule) == 1, rule
    assert tex.count(r"\caption{") == 1 and tex.count(r"\label{") == 1
    assert tex.count(r"\begin{table}") == tex.count(r"\end{table}") == 1
    assert tex.count(r"\begin{tabular}") == tex.count(r"\end{tabular}") == 1
    assert tex.count(r"\centering") == 1
    spec = re.search(r"\\begin\{tabular\}\{([a-z|]+)\}", tex).group(1)
    columns = len(spec.replace("|", ""))
    inner = tex.split(r"\toprule", 1)[1].split(r"\bottomrule", 1)[0]
    rows = [line for line in inner.splitlines() if line.strip() and line.strip() != r"\midrule"]
    assert len(rows) >= 2  # the header and at least one body row
    cells = []
    for row in rows:
        assert row.rstrip().endswith(r"\\"), row
        assert len(re.findall(r"(?<!\\)&", row)) + 1 == columns, row
        cells.append([c.strip() for c in re.split(r"(?<!\\)&", row.rstrip()[:-2])])
    for line in body_lines(tex):
        assert not re.search(r"(?<!\\)[_%#$]", line), line
        assert not re.search(r"(?<!\\)&", line) or line in rows, line
    return cells


def macros_of(tex: str) -> dict[str, str]:
    """Macro name -> body, asserting each is one line with a comment line above it."""
    lines = tex.splitlines()
    names = {}
    for k, line in enumerate(lines):
        if line.startswith(r"\newcommand"):
            match = MACRO.match(line)
            assert match, line
            assert k > 0 and lines[k - 1].startswith("% ") and len(lines[k - 1]) > 3, line
            name, body = match.groups()
            assert name not in names, name
            assert body.strip(), name
            names[name] = body
    assert tex.isascii()
    assert len(names) == tex.count(r"\newcommand")
    return names


@pytest.fixture
def tables(gpu_tables):
    return {name: frame.copy() for name, frame in gpu_tables.items()}


@pytest.fixture
def comparison():
    rows = []
    for op, size, a, b, ratio, lo, hi, verdict in (
        ("matmul", 256, 20e-6, 10e-6, 0.5, 0.48, 0.52, "faster"),
        ("matmul", 1024, 130e-6, 140e-6, 1.08, 1.05, 1.11, "slower"),
        ("compute_then_plot", 256, 80e-6, 80e-6, 1.0, 0.99, 1.01, "same"),
        ("compute_then_plot", 1024, 500e-6, 2e-3, 4.0, 0.9, 9.0, "undecided"),
    ):
        rows.append({"machine_a": "laptop", "machine_b": "h200-lab", "op": op, "library": "torch",
                     "device": "cuda", "dtype": "float32", "size": size, "threads": "1", "median_a_s": a,
                     "median_b_s": b, "ratio": ratio, "ratio_ci_low": lo, "ratio_ci_high": hi,
                     "verdict": verdict, "speedup_a": 2.0, "speedup_b": 4.0})
    return pd.DataFrame(rows)


# --- formatting -------------------------------------------------------------------------


def test_numbers_keep_three_significant_digits_without_exponents():
    assert fmt_sig(1.2345) == "1.23"
    assert fmt_sig(0.000123456) == "0.000123"
    assert fmt_sig(4102.9) == "4103"
    assert fmt_sig(9.996) == "10.0"
    assert fmt_sig(float("nan")) == "–" and fmt_sig(None) == "–"
    assert fmt_ci(1.2345, 1.2, 1.26) == "1.23 (1.20–1.26)"
    assert fmt_ci(27.8, 27.66, 27.93) == "27.8 (27.7–27.9)"
    assert fmt_ci(1.5, math.nan, 2.0) == "1.50"


def test_the_time_unit_follows_the_data():
    assert time_unit([2e-5, 3e-5, 1e-3]) == ("µs", 1e-6)
    assert time_unit([2e-5, 3e-3, 1.0]) == ("ms", 1e-3)
    assert time_unit([]) == ("ms", 1e-3)


def test_escape_handles_the_special_characters():
    assert tex_escape("compute_then_plot") == r"compute\_then\_plot"
    assert tex_escape("50% & #1 {x} $y ~ ^") == r"50\% \& \#1 \{x\} \$y \textasciitilde{} \textasciicircum{}"
    assert tex_escape(r"a\b") == r"a\textbackslash{}b"
    assert tex_escape("2× ±3 µs 1–2 n ≈ 606, n ≤ 256") == (
        r"2\ensuremath{\times} \ensuremath{\pm}3 \textmu{}s 1--2 n \ensuremath{\approx} 606, "
        r"n \ensuremath{\leq} 256"
    )
    assert tex_escape("line\nbreak").isascii() and "\n" not in tex_escape("line\nbreak")
    assert tex_escape("日本").isascii()


def test_booktabs_table_escapes_cells_headers_and_caption():
    frame = pd.DataFrame({"op_name (50%)": ["compute_then_plot", "a & b"], "share #": ["0.123", "12.0"],
                          "n": ["256", "4096"]})
    tex = booktabs_table(frame, "Caption with 95% CI & under_score", "tab:test-1")
    cells = check_table(tex)
    assert cells[0] == [r"op\_name (50\%)", r"share \#", "n"]
    assert cells[1] == [r"compute\_then\_plot", "0.123", "256"]
    assert cells[2] == [r"a \& b", "12.0", "4096"]
    assert r"\caption{Caption with 95\% CI \& under\_score}" in tex
    assert r"\begin{tabular}{lrr}" in tex


def test_booktabs_table_rejects_a_label_latex_would_mangle():
    with pytest.raises(ValueError, match="label"):
        booktabs_table(pd.DataFrame({"a": ["1"]}), "c", "tab:a b")


# --- tables -----------------------------------------------------------------------------


def test_timings_table_lists_ok_cells_with_ci(tables):
    timings = tables["timings"]
    timings.loc[0, "op"] = "compute_then_plot"
    timings.loc[1, "status"] = "failed"
    timings.loc[2, "flagged"] = True
    tex = machine_tex("timings", timings, POLICY)
    cells = check_table(tex)
    assert cells[0] == ["op", "variant", "device", "dtype", "n", "threads", r"median (ms), 95\% CI", "GFLOP/s"]
    assert len(cells) - 1 == len(timings) - 1  # the failed cell is left out
    assert cells[1][0] == r"compute\_then\_plot"
    assert re.fullmatch(r"1\.00 \(\d\.\d\d--\d\.\d\d\)", cells[1][6])
    assert cells[2][6].endswith("*") and "flagged unstable" in tex
    assert r"\label{tab:gpubox-timings}" in tex


def test_timings_of_fast_cells_are_in_microseconds(tables):
    timings = tables["timings"]
    fast = timings[timings["device"] == "cuda"].head(1)
    cells = check_table(machine_tex("timings", fast, POLICY))
    assert cells[0][6] == r"median (\textmu{}s), 95\% CI"
    assert cells[1][6].startswith("20.0 (")


def test_speedups_table_has_both_speedups_verdicts_and_break_even(tables):
    cells = check_table(machine_tex("speedups", tables["speedups"], POLICY))
    header = cells[0]
    assert header[6:] == [r"speedup (95\% CI)", "verdict", r"end-to-end speedup (95\% CI)",
                          "end-to-end verdict", "break-even n", r"calls per round trip k* (95\% CI)"]
    assert all(re.fullmatch(r"[\d.]+ \([\d.]+--[\d.]+\)", row[11]) for row in cells[1:] if row[2] == "cuda")
    assert all(row[11] == "--" for row in cells[1:] if row[2] == "cpu")
    cuda = [row for row in cells[1:] if row[2] == "cuda"]
    assert len(cuda) == 3
    assert all(row[7] == "faster" and row[10] == "at most 256" for row in cuda)
    assert all(re.fullmatch(r"[\d.]+\\ensuremath\{\\times\} \([\d.]+--[\d.]+\)", row[8]) for row in cuda)
    assert all(row[10] == "not reached" for row in cells[1:] if row[2] == "cpu")


def test_speedups_break_even_reads_as_a_number_when_reached(tables):
    speedups = tables["speedups"]
    gpu = speedups["device"] == "cuda"
    speedups.loc[gpu, "break_even_size"] = 606.4
    speedups.loc[gpu, "break_even_status"] = "reached"
    cells = check_table(machine_tex("speedups", speedups, POLICY))
    assert {row[10] for row in cells[1:] if row[2] == "cuda"} == {"606"}
    assert "MatmulCudaFloatThirtyTwoBreakEven}{606}" in claims_macros(tables["timings"], speedups, tables["transfer"], POLICY)
    speedups.loc[gpu, ["break_even_size", "break_even_status"]] = [256.0, "from the smallest size"]
    assert {row[10] for row in check_table(machine_tex("speedups", speedups, POLICY))[1:] if row[2] == "cuda"} == {"at most 256"}


def test_transfer_table(tables):
    cells = check_table(machine_tex("transfer", tables["transfer"], POLICY))
    assert cells[0] == ["device", "direction", "memory", "size", r"GB/s (95\% CI)", "of link"]
    assert len(cells) == 1 + 12
    assert [r"cuda", r"host \ensuremath{\rightarrow} device", "pinned", "256 MiB"] == cells[9][:4]
    assert cells[9][4].startswith("50.0 (")


@pytest.mark.parametrize("make", [
    lambda t: machine_tex("speedups", t["speedups"].iloc[0:0], POLICY, "gpubox"),
    lambda t: machine_tex("speedups", pd.DataFrame(), POLICY, "gpubox"),
    lambda t: machine_tex("transfer", t["transfer"].iloc[0:0], POLICY, "gpubox"),
    lambda t: machine_tex("transfer", pd.DataFrame(columns=list(TRANSFER)), POLICY, "gpubox"),
    lambda t: machine_tex("timings", t["timings"].assign(status="failed"), POLICY, "gpubox"),
    lambda t: comparison_tex(pd.DataFrame(), POLICY, ["laptop", "h200-lab"]),
], ids=["speedups", "speedups-no-columns", "transfer", "transfer-columns-only", "timings-none-ok", "comparison"])
def test_an_empty_table_is_a_valid_one_row_table_that_says_so(tables, make):
    tex = make(tables)
    cells = check_table(tex)
    assert len(cells) == 2
    assert cells[1][0].startswith("No ") and all(c == "" for c in cells[1][1:])
    assert tex.splitlines()[1].startswith("% No ")


def test_transfer_reasons_show_when_no_copy_ran():
    failed = tables_of([], "cpubox", [make_transfer_record(status="failed", reason="no CUDA device")])["transfer"]
    cells = check_table(machine_tex("transfer", failed, POLICY, "cpubox"))
    assert cells[1][0] == "No copy was measured (no CUDA device)."


def test_comparison_table_names_both_machines(comparison):
    cells = check_table(comparison_tex(comparison, POLICY))
    assert cells[0][6:] == [r"median on laptop (\textmu{}s)", r"median on h200-lab (\textmu{}s)",
                            r"ratio h200-lab/laptop (95\% CI)", "verdict"]
    assert cells[1][6:] == ["20.0", "10.0", r"0.50\ensuremath{\times} (0.48--0.52)", "faster"]
    assert cells[3][0] == r"compute\_then\_plot"
    assert cells[4][8] == r"CI spans 10.0\ensuremath{\times}"  # a CI over 2x is no number, in LaTeX too
    assert [row[-1] for row in cells[1:]] == ["faster", "slower", "same", "undecided"]


def test_comparison_of_several_pairs_gets_machine_columns(comparison):
    other = comparison.assign(machine_b="a100_box")
    cells = check_table(comparison_tex(pd.concat([comparison, other], ignore_index=True), POLICY))
    assert cells[0][:2] == ["machine a", "machine b"]
    assert r"a100\_box" in {row[1] for row in cells[1:]}


# --- macros -----------------------------------------------------------------------------


def test_machine_prefix_spells_digits_as_words():
    assert machine_prefix("h200-lab") == "obHTwoHundredLab"
    assert machine_prefix("laptop") == "obLaptop"
    assert machine_prefix("a100_80GB") == "obAOneHundredEightyGB"
    assert pair_prefix("laptop", "h200-lab") == "obLaptopVsHTwoHundredLab"
    assert number_words("32") == "ThirtyTwo"
    assert number_words("4096") == "FourThousandNinetySix"
    assert number_words("1000000") == "OneMillion"
    assert number_words("007") == "ZeroZeroSeven" and number_words("0") == "Zero"
    assert camel_words("compute_then_plot") == "ComputeThenPlot"
    assert camel_words("bfloat16") == "BfloatSixteen"
    with pytest.raises(ValueError, match="no letter or digit"):
        machine_prefix("--")


def test_claims_macros_are_letters_only_unique_prefixed_and_non_empty(tables):
    tex = claims_macros(tables["timings"], tables["speedups"], tables["transfer"], POLICY)
    names = macros_of(tex)
    assert all(name.startswith("obGpubox") for name in names)
    # the headline is the decisions' speedup, end to end; the same cell's device-resident one beside it
    assert names["obGpuboxLargestSpeedup"] == "14.4"
    assert float(names["obGpuboxLargestSpeedupLow"]) < 14.4 < float(names["obGpuboxLargestSpeedupHigh"])
    assert names["obGpuboxLargestSpeedupCell"] == "matmul with torch on cuda, float32, n = 4096"
    assert names["obGpuboxLargestSpeedupResident"] == "27.8"
    assert names["obGpuboxMatmulCudaFloatThirtyTwoBreakEven"] == "at most 256"
    assert names["obGpuboxCudaPinnedHostToDeviceBandwidth"] == "50.0"
    assert names["obGpuboxCudaPageableDeviceToHostBandwidth"] == "20.0"
    assert names["obGpuboxCudaPinnedHostToDeviceBandwidthSize"] == "256 MiB"
    assert names["obGpuboxCells"] == "15" and names["obGpuboxProcessesPerCell"] == "2"


def test_two_machines_give_disjoint_macros(tables):
    a = macros_of(claims_macros(tables["timings"], tables["speedups"], tables["transfer"], POLICY,
                                machine="h200-lab"))
    b = macros_of(claims_macros(tables["timings"], tables["speedups"], tables["transfer"], POLICY,
                                machine="laptop"))
    assert all(n.startswith("obHTwoHundredLab") for n in a) and all(n.startswith("obLaptop") for n in b)
    assert not set(a) & set(b)
    assert len(a) == len(b)


def test_claims_without_speedups_or_copies_still_define_their_macros(tables):
    tex = claims_macros(tables["timings"], tables["speedups"].iloc[0:0], tables["transfer"].iloc[0:0], POLICY)
    names = macros_of(tex)
    assert names["obGpuboxLargestSpeedup"] == "n/a"
    assert names["obGpuboxLargestSpeedupResidentCell"] == "n/a"
    assert names["obGpuboxCopyBandwidth"] == "n/a"
    assert not any(name.endswith("BreakEven") for name in names)


def test_clashing_macro_names_fail_loudly(tables):
    speedups = tables["speedups"]
    speedups.loc[speedups.index[-1], "op"] = "mat-mul"
    speedups.loc[speedups.index[-2], "op"] = "mat_mul"
    with pytest.raises(MacroCollision, match=r"\\obGpuboxMatMulCudaFloatThirtyTwoBreakEven"):
        claims_macros(tables["timings"], speedups, tables["transfer"], POLICY)
    macros = Macros("obX")
    with pytest.raises(ValueError, match="letters only"):
        macros.add("Two2", "1", "a digit")
    with pytest.raises(ValueError, match="letters only"):
        Macros("ob_x")


def test_comparison_macros_count_verdicts_and_name_the_largest_ratio(comparison):
    names = macros_of(comparison_macros(comparison, POLICY))
    prefix = "obLaptopVsHTwoHundredLab"
    assert all(name.startswith(prefix) for name in names)
    assert [names[prefix + v] for v in ("Faster", "Slower", "Same", "Undecided", "Cells")] == ["1", "1", "1", "1", "4"]
    assert names[prefix + "LargestRatio"] == "4.00"
    assert (names[prefix + "LargestRatioLow"], names[prefix + "LargestRatioHigh"]) == ("0.900", "9.00")
    assert names[prefix + "LargestRatioVerdict"] == "undecided"
    assert names[prefix + "LargestRatioCell"] == r"compute\_then\_plot with torch on cuda, float32, n = 1024"
    assert names[prefix + "SmallestRatio"] == "0.500"


def test_comparison_macros_of_several_pairs_are_disjoint(comparison):
    both = pd.concat([comparison, comparison.assign(machine_b="a100")], ignore_index=True)
    names = macros_of(comparison_macros(both, POLICY))
    assert names["obLaptopVsHTwoHundredLabCells"] == "4" and names["obLaptopVsAOneHundredCells"] == "4"
    clash = pd.concat([comparison, comparison.assign(machine_b="h200_lab")], ignore_index=True)
    with pytest.raises(MacroCollision):
        comparison_macros(clash, POLICY)


# --- files ------------------------------------------------------------------------------


def test_write_latex_writes_every_file_from_tables_read_back_from_csv(tables, tmp_path):
    paths = {}
    for name in ("timings", "speedups", "transfer", "decisions"):
        paths[name] = tmp_path / f"{name}.csv"
        tables[name].to_csv(paths[name], index=False)
    written = write_latex(read_tables(paths), tmp_path / "tex", "h200-lab", POLICY)
    assert sorted(p.relative_to(tmp_path / "tex").as_posix() for p in written.values()) == [
        "claims.tex", "tables/decisions.tex", "tables/speedups.tex", "tables/timings.tex", "tables/transfer.tex"]
    for name in ("timings", "speedups", "transfer", "decisions"):
        check_table(written[name].read_text())
    names = macros_of(written["claims"].read_text())
    assert all(name.startswith("obHTwoHundredLab") for name in names)
    assert names["obHTwoHundredLabMachine"] == "h200-lab"
    # one macro per decision, holding the sentence the report and the terminal give
    decisions = tables["decisions"]
    decided = {k: v for k, v in names.items() if k.endswith("Decision")}
    assert len(decided) == len(decisions) > 0
    assert names["obHTwoHundredLabMatmulCudaFloatThirtyTwoDecision"].startswith("use torch")


def test_write_latex_of_a_machine_without_gpu_or_copies(tmp_path):
    records = make_processes(2, library="numpy") + make_processes(2, library="numpy", threads="all", seed=3)
    tables = tables_of(records, "cpu_box")
    written = write_latex(tables, tmp_path, "cpu_box", POLICY)
    for name in ("timings", "speedups", "transfer"):
        check_table(written[name].read_text())
    names = macros_of(written["claims"].read_text())
    assert names["obCpuBoxLargestSpeedup"] == "n/a" and names["obCpuBoxMachine"] == r"cpu\_box"


def test_write_comparison_latex(comparison, tmp_path):
    written = write_comparison_latex(comparison, tmp_path, ["laptop", "h200-lab"], POLICY)
    assert (tmp_path / "tables" / "comparison.tex").is_file() and (tmp_path / "claims.tex").is_file()
    check_table(written["comparison"].read_text())
    assert macros_of(written["claims"].read_text())["obLaptopVsHTwoHundredLabFaster"] == "1"


def test_write_comparison_latex_without_rows_or_machine_columns(comparison, tmp_path):
    written = write_comparison_latex(comparison.iloc[0:0], tmp_path / "empty", ["laptop", "h200-lab"], POLICY)
    check_table(written["comparison"].read_text())
    names = macros_of(written["claims"].read_text())
    assert names["obLaptopVsHTwoHundredLabCells"] == "0"
    assert names["obLaptopVsHTwoHundredLabLargestRatio"] == "n/a"
    bare = comparison.drop(columns=["machine_a", "machine_b"])
    written = write_comparison_latex(bare, tmp_path / "bare", ["laptop", "h200-lab"], POLICY)
    assert "ratio h200-lab/laptop" in written["comparison"].read_text()
    lonely = write_comparison_latex(pd.DataFrame(), tmp_path / "lonely", ["laptop"], POLICY)
    check_table(lonely["comparison"].read_text())
    assert "\\newcommand" not in lonely["claims"].read_text()


def test_every_character_the_reports_own_words_use_prints_in_latex():
    """The LaTeX output is ASCII; a character of the report's own words with no LaTeX form
    would print as "?" (as δ once did in every caption that named the minimum effect)."""
    package = Path(__file__).resolve().parents[2] / "workflow" / "offloadbench"
    sources = [*package.glob("report/**/*.py"), package / "verdicts.py", package / "units.py"]
    used = {ch for path in sources for ch in path.read_text(encoding="utf-8") if not ch.isascii()}
    assert used and not [ch for ch in sorted(used) if "?" in tex_escape(ch) + tex_comment(ch)]
