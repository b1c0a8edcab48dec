"""The stages keep to their lanes: the measuring code never loads pandas, seaborn or the
analysis, and the analysis, figures and report never load the timing or device code."""

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "workflow" / "offloadbench"
STAGES = ("measure", "jobs", "analysis", "report")
LEAF_PACKAGES = ("records", "libraries")  # shared leaves in folders of their own: the typed records and their readers; the array libraries
FORBIDDEN = {
    # the timing code is driven by the jobs, never the other way round
    "measure": {"pandas", "seaborn", "offloadbench.jobs", "offloadbench.analysis", "offloadbench.report"},
    "jobs": {"pandas", "seaborn", "offloadbench.analysis", "offloadbench.report"},
    # the analysis makes tables; the report reads them, and never the other way round
    "analysis": {"torch", "offloadbench.measure", "offloadbench.jobs", "offloadbench.report"},
    "report": {"torch", "offloadbench.measure", "offloadbench.jobs"},
    # the shared leaves serve every stage and belong to none
    "leaf": {"torch", *(f"offloadbench.{stage}" for stage in STAGES)},
}


def imported_modules(path: Path, root: Path = ROOT) -> set[str]:
    """Every module a file imports, lazily or not, with relative imports made absolute."""
    package = ".".join(path.relative_to(root / "workflow").with_suffix("").parts[:-1])
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            if node.level:
                base = base[: len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


def stage_of(path: Path) -> str:
    parts = path.relative_to(PACKAGE).parts
    return parts[0] if len(parts) > 1 and parts[0] not in LEAF_PACKAGES else "leaf"


# The settling job decides from the analysis which cells an extra round measures, then
# runs that round as a separate process: it may read the pandas-free analysis of records.
ALLOWED = {"jobs/settle.py": {"offloadbench.analysis"}}


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_each_module_keeps_to_its_stage(path):
    forbidden = FORBIDDEN[stage_of(path)] - ALLOWED.get(str(path.relative_to(PACKAGE)), set())
    crossing = sorted(m for m in imported_modules(path) if any(m == f or m.startswith(f + ".") for f in forbidden))
    assert not crossing, f"{path.relative_to(PACKAGE)} ({stage_of(path)}) imports {crossing}"


def loaded_after(statement: str) -> set[str]:
    code = f"import sys; {statement}; print(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(ROOT / "workflow"), "PATH": ""})
    return set(out.stdout.split())


def test_a_measuring_process_loads_neither_pandas_nor_the_analysis():
    loaded = loaded_after("import offloadbench.jobs.round, offloadbench.jobs.worker, offloadbench.measure.cell, "
                          "offloadbench.measure.provenance")
    assert not {"pandas", "seaborn", "scipy", "offloadbench.analysis", "offloadbench.report"} & loaded


def test_the_settling_job_loads_neither_pandas_nor_the_report():
    loaded = loaded_after("import offloadbench.jobs.settle")
    assert not {"pandas", "seaborn", "torch", "offloadbench.report", "offloadbench.analysis.tables"} & loaded


def test_the_analysis_and_report_load_no_timing_or_device_code():
    loaded = loaded_after("import offloadbench.analysis.tables, offloadbench.report.text.markdown, offloadbench.report.figures.figures")
    assert not {"torch", "offloadbench.measure", "offloadbench.jobs"} & loaded


def test_every_stage_is_a_folder_and_every_folder_a_stage():
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders == {*STAGES, *LEAF_PACKAGES}


def test_ruff_is_clean():
    ruff = Path(sys.executable).parent / "ruff"
    result = subprocess.run([str(ruff), "check", "workflow", "tests", "benchmarks", "tools"], cwd=ROOT, capture_output=True,
                            text=True, check=False)
    assert result.returncode == 0, result.stdout[-3000:]


# The report is two rooms over shared pieces: report/figures/ draws, report/text/ writes
# sentences, and both take their words, numbers and orders from the shared modules beside
# them (format, escape, captions, page, table), so a figure never needs a prose module.
REPORT = PACKAGE / "report"
ROOMS = ("figures", "text")
SHARED = {"__init__", "format", "escape", "captions", "page", "publish", "table"}


def modules_of(room: str) -> list[Path]:
    return sorted(p for p in (REPORT / room).glob("*.py") if p.stem != "__init__")


@pytest.mark.parametrize("path", modules_of("figures"), ids=lambda p: p.stem)
def test_figures_import_no_prose_module(path):
    prose = sorted(m for m in imported_modules(path) if m.startswith("offloadbench.report.text"))
    assert not prose, f"report/figures/{path.name} imports prose modules: {prose}"


def test_the_report_is_two_rooms_over_shared_pieces():
    folders = {p.name for p in REPORT.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders == set(ROOMS), "a report module lives in report/figures/, report/text/ or is shared"
    assert {p.stem for p in REPORT.glob("*.py")} == SHARED, "classify a new report module: figures, text or shared"
    for room in ROOMS:
        assert modules_of(room), f"report/{room}/ is empty"


@pytest.mark.parametrize("path", sorted(REPORT.glob("*.py")), ids=lambda p: p.stem)
def test_the_shared_pieces_import_neither_room_except_publish(path):
    """format, escape and captions serve both rooms; only publish, which writes whole
    outputs, puts figures and text together."""
    rooms = sorted(m for m in imported_modules(path)
                   if m.startswith(("offloadbench.report.figures", "offloadbench.report.text")))
    assert path.stem == "publish" or not rooms, f"report/{path.name} imports {rooms}"


def private_imports(path: Path) -> list[str]:
    """Names starting with an underscore that a module imports from another of the package."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("offloadbench")):
            found += [f"{node.module}.{a.name}" for a in node.names if a.name.startswith("_")]
    return found


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_imports_another_modules_private_names(path):
    assert not private_imports(path), f"{path.relative_to(PACKAGE)} imports {private_imports(path)}"


# Keys that exist only in raw records: outside records/, they are read as typed attributes
# (records/types.py), never as dict keys, so that one reader knows every record version.
RECORD_ONLY_KEYS = {"samples_s", "phases", "stopping", "diagnostics", "provenance", "warmup", "op_info", "sharing",
                    "turns", "heavy_modules"}


def record_key_reads(path: Path) -> list[str]:
    """`x.get("samples_s")` and `x["samples_s"]` of a record-only key, as "line: key"."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        key = None
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                and node.args and isinstance(node.args[0], ast.Constant)):
            key = node.args[0].value
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            key = node.slice.value
        if key in RECORD_ONLY_KEYS:
            found.append(f"{node.lineno}: {key}")
    return found


@pytest.mark.parametrize("stage", ["analysis", "report"])
def test_the_analysis_and_report_read_records_as_typed_objects(stage):
    reads = {str(p.relative_to(PACKAGE)): r for p in sorted((PACKAGE / stage).rglob("*.py")) if (r := record_key_reads(p))}
    assert not reads, f"record keys read as dict keys outside records/: {reads}"


def test_the_record_key_check_finds_a_dict_read(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("def f(record):\n    return record.get('samples_s', {}), record['warmup']\n")
    assert record_key_reads(sample) == ["2: samples_s", "2: warmup"]


# Tables and records hold values: the analysis and the report read their fields, and never
# take words apart, theirs or another stage's. A string method or regex that could split or
# match text is allowed only where it works on text the code itself formats, or makes data
# inert; each such place is named here with why, so a new parse fails this test.
TEXT_TOOLS = {"startswith", "endswith", "partition", "rpartition", "split", "rsplit", "removeprefix", "removesuffix"}
OWN_TEXT = {
    "analysis/tables.py speedups_table": "picks column names from a declared list",
    "report/captions.py size_label": "the catalogue's own words for n",
    "report/escape.py <module>": "makes data inert: rewrites text, reads no value from it",
    "report/escape.py md_text": "makes data inert",
    "report/escape.py tex_comment": "makes data inert",
    "report/figures/compare_figures.py _legend": "measures the lines of its own labels",
    "report/figures/style.py wrap": "wraps its own labels",
    "report/figures/style.py Page.add_legend": "wraps its own labels",
    "report/figures/style.py panel_title": "wraps its own titles",
    "report/format.py fmt_ci": "counts the decimals of the number it has just formatted",
    "report/page.py slug": "anchors of the report's own headings",
    "report/table.py <module>": "labels and alignment of its own cells",
    "report/page.py unescaped": "the report's own headings",
    "report/page.py markdown_headings": "the report's own headings",
    "report/page.py _print_size": "reads a PNG's header from the page it builds",
    "report/text/gpu_check.py judge": "CUDA's own error text, which no code of ours writes",
    "report/text/gpu_check.py read_phases": "the check script's own file of phase times",
    "report/text/gpu_check.py main": "its own command line's name:seconds budgets",
    "report/text/latex_macros.py camel_words": "names of its own macros",
    "report/text/latex_macros.py number_words": "the words of a number inflect spelled, for its own macro names",
    "report/text/latex_macros.py Macros.__post_init__": "checks its own macro prefix",
    "report/text/latex_macros.py Macros.add": "checks its own macro names",
    "report/text/latex_tables.py slug": "labels of its own tables",
    "report/text/markdown.py build_markdown": "the layout's figure names",
    "report/text/markdown.py figure_lines": "alt text from its own caption",
    "report/text/summary.py summarize": "a file name's suffix",
}


def text_parsing(path: Path, root: Path = PACKAGE) -> set[str]:
    """"<module> <function>" of every call that could take text apart: a string method of
    TEXT_TOOLS, `re.*`, or a pandas `.str` accessor."""
    found = set()

    def visit(node, where):
        for child in ast.iter_child_nodes(node):
            name = where
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = child.name if where == "<module>" else f"{where}.{child.name}"
            if isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute):
                func = child.func
                if func.attr in TEXT_TOOLS or (isinstance(func.value, ast.Name) and func.value.id == "re") or \
                        (isinstance(func.value, ast.Attribute) and func.value.attr == "str"):
                    found.add(f"{path.relative_to(root)} {name}")
            visit(child, name)

    visit(ast.parse(path.read_text()), "<module>")
    return found


def test_the_analysis_and_report_parse_no_text_from_tables_or_records():
    found = set().union(*(text_parsing(p) for stage in ("analysis", "report") for p in (PACKAGE / stage).rglob("*.py")))
    assert not found - set(OWN_TEXT), f"text taken apart outside the named places: {sorted(found - set(OWN_TEXT))}"
    assert not set(OWN_TEXT) - found, f"named places that no longer parse (drop them): {sorted(set(OWN_TEXT) - found)}"


# Every number the report writes goes through report/format.py, so one value reads the same
# in a sentence, a table, LaTeX and a figure: no format spec anywhere else in report/.
def number_formats(path: Path) -> list[int]:
    """Lines of `path` that format a number themselves: an f-string's format spec, or a
    "{:...}" template for str.format."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return sorted({node.lineno for node in ast.walk(tree)
                   if (isinstance(node, ast.FormattedValue) and node.format_spec is not None)
                   or (isinstance(node, ast.Constant) and isinstance(node.value, str) and "{:" in node.value)})


def test_the_report_formats_numbers_in_one_module():
    found = {f"{p.relative_to(PACKAGE)}:{line}" for p in (PACKAGE / "report").rglob("*.py")
             if p.name != "format.py" for line in number_formats(p)}
    assert not found, f"numbers formatted outside report/format.py: {sorted(found)}"


def test_the_number_format_check_finds_a_format_spec(tmp_path):
    sample = tmp_path / "sample.py"
    for line in ('f"{x:.2f}×"', '"{:.4g}".format(x)', 'f"{x:g}"'):
        sample.write_text(f"def f(x):\n    return {line}\n")
        assert number_formats(sample) == [2], line
    sample.write_text('def f(x):\n    return f"{x} calls"\n')
    assert number_formats(sample) == []


def test_the_text_parsing_check_finds_a_flag_taken_apart(tmp_path):
    sample = tmp_path / "sample.py"
    for line in ("row['unstable'].startswith('drift')", "re.search('x', row.why)", "row.str.lower()",
                 "row.why.partition('; ')"):
        sample.write_text(f"import re\ndef f(row):\n    return {line}\n")
        assert text_parsing(sample, tmp_path) == {"sample.py f"}, line
    sample.write_text("def f(row):\n    return row.kind == 'drift'\n")
    assert text_parsing(sample, tmp_path) == set()


# No import circles, lazy imports inside functions included: a circle means two modules
# depend on each other even where nothing fails at import time. `from . import x` depends
# on the module x, not on the package it sits in.
def module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root / "workflow").with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(package: Path = PACKAGE, root: Path = ROOT) -> dict[str, set[str]]:
    """Each module of the package and the package's modules it imports."""
    modules = {module_name(p, root): p for p in package.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        imported = imported_modules(path, root)
        # a name from a module is the module; a module from a package is that module only
        direct = {m for m in imported if m in modules and m != name and
                  not any(o.startswith(m + ".") and o in modules for o in imported)}
        graph[name] = direct
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in graph.get(node, ()):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while not group or group[-1] != node:
                group.append(stack.pop())
                on_stack.discard(group[-1])
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_module_imports_another_that_imports_it_back():
    assert circles(import_graph()) == []


def test_the_circle_check_finds_a_circle_through_a_lazy_import(tmp_path):
    package = tmp_path / "workflow" / "pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from .b import thing\n")
    (package / "b.py").write_text("def thing():\n    from . import c\n")
    (package / "c.py").write_text("import pkg.a\n")
    assert circles(import_graph(package, tmp_path)) == [["pkg.a", "pkg.b", "pkg.c"]]


def test_the_standin_gpu_is_test_equipment_outside_the_package():
    assert not [p for p in PACKAGE.rglob("*.py") if "class StandInCuda" in p.read_text()]
    code = "from offloadbench.measure import devices; devices.import_torch()"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False,
                         env={"PYTHONPATH": str(ROOT / "workflow"), "PATH": "", "OFFLOADBENCH_STANDIN_GPU": "1"})
    assert out.returncode != 0
    assert "put the repository's tests/standin on PYTHONPATH" in out.stderr.strip().splitlines()[-1]


def test_the_report_takes_its_judging_policy_from_judging_json_only():
    """δ and the confidence level reach the report, its figures, captions and summary from
    judging.json, which the aggregate job writes: no report module and no rule builds a
    policy of its own from the config or a default."""
    readers = [*(PACKAGE / "report").rglob("*.py"), *(ROOT / "workflow" / "rules").glob("*.smk"),
               *(ROOT / "workflow" / "scripts").glob("*.py")]
    builds = [str(p.relative_to(ROOT)) for p in readers if re.search(r"Judging(\.from_config)?\(", p.read_text())]
    assert builds == []


# What only older record versions wrote: their readers live in records/legacy.py alone.
LEGACY_MARKS = ('get("rounds")', "RENAMED_SETTINGS", "FLAG_PREFIXES", "about (\\d+) processes")


def test_only_the_legacy_module_knows_what_older_record_versions_wrote():
    knowing = {path.relative_to(PACKAGE).as_posix(): mark for path in PACKAGE.rglob("*.py")
               for mark in LEGACY_MARKS if mark in path.read_text()}
    assert set(knowing) == {"records/legacy.py"}, knowing
