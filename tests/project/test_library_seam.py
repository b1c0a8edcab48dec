"""A library is one file: outside workflow/offloadbench/libraries/ no code branches on a
library's name, and the names every schema allows are the registry's."""

import importlib.util
import re
from pathlib import Path

import pytest
import yaml
from offloadbench import libraries

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "workflow" / "schemas"


def _tool():
    spec = importlib.util.spec_from_file_location("library_branches", ROOT / "tools" / "library-branches.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_code_outside_the_registry_branches_on_a_librarys_name(capsys):
    assert _tool().main([]) == 0, capsys.readouterr().out


def test_the_branch_count_finds_every_form_of_a_branch(tmp_path):
    (tmp_path / "code.py").write_text(
        'if cell.library == "torch":\n    pass\n'
        'uses = "numpy" in libraries\n'
        'same = lib.__name__ != "torch"\n'
        'match library:\n    case "numpy":\n        pass\n'
        'found = libraries.get("torch")  # a lookup, not a branch\n')
    (tmp_path / "rules.smk").write_text('x = 1 if config["library"] == "numpy" else 2\n# "torch" == said here\n')
    found = _tool().branches([tmp_path])
    assert [where.rsplit(":", 1)[1] for where in found] == ["1", "3", "4", "6", "1"]


def test_the_registry_gives_the_baseline_and_the_order_of_simplicity():
    assert libraries.NAMES[0] == libraries.BASELINE and libraries.is_baseline(libraries.BASELINE)
    order = sorted(((name, compiled) for name in libraries.NAMES for compiled in (False, True)),
                   key=lambda variant: libraries.simplicity(*variant))
    # the baseline first, every eager library before every compiled one
    assert order[0] == (libraries.BASELINE, False)
    assert [compiled for _, compiled in order] == sorted(compiled for _, compiled in order)
    # numpy compiled is torch compiling NumPy code: it runs on torch's runtime
    assert libraries.runtime(libraries.BASELINE, True).name == libraries.get(libraries.BASELINE).compiler


def _enums(node, key):
    """Every enum under `key` in a schema's tree."""
    if isinstance(node, dict):
        for name, value in node.items():
            if name == key:
                yield value.get("enum") or value.get("items", {}).get("enum")
            yield from _enums(value, key)
    elif isinstance(node, list):
        for value in node:
            yield from _enums(value, key)


@pytest.mark.parametrize("schema", ["config.schema.yaml", "record.schema.yaml", "roofs.schema.yaml"])
def test_every_schema_allows_the_registrys_libraries_and_no_other(schema):
    enums = [e for e in _enums(yaml.safe_load((SCHEMAS / schema).read_text()), {"config.schema.yaml": "libraries"}
                               .get(schema, "library")) if e]
    assert enums and all(list(e) == list(libraries.NAMES) for e in enums), enums



def test_a_grid_that_names_an_extra_library_gets_it_installed_by_make_run(tmp_path):
    extras = importlib.util.spec_from_file_location("extras", ROOT / "tools" / "extras.py")
    module = importlib.util.module_from_spec(extras)
    extras.loader.exec_module(module)
    (tmp_path / "mine.yaml").write_text("grid:\n  libraries:\n    - numpy\n    - jax\n")
    assert module.extras(tmp_path / "mine.yaml") == ["requirements-jax.txt"]
    assert module.extras(ROOT / "config" / "config.yaml") == []  # the default grid needs no extra
    assert "tools/extras.py $(CONFIG)" in (ROOT / "Makefile").read_text()


def test_an_extra_library_that_is_not_installed_has_its_cells_skipped_saying_how_to_install_it(monkeypatch, tmp_path):
    """A host that lacks an extra (a GPU host without CuPy, say) still measures the rest of
    the grid: the environment job records the library as missing, and its cells are skipped
    with the way to install it."""
    import json

    from offloadbench.jobs import environment
    from offloadbench.records import Environment, load_record
    from rounds import SETTINGS, make_box, run_round

    monkeypatch.setattr(libraries, "versions", lambda: {**{name: "1" for name in libraries.NAMES}, "jax": None})
    found = environment.capture("here", ["numpy", "jax"])
    reason = found["libraries_missing"]["jax"]
    assert re.match(r"jax is not installed in the Python that runs the measure rules .*: pip install -r "
                    r"requirements-jax.txt", reason)
    assert Environment.from_json(found).library_reason("numpy") is None

    box = make_box(tmp_path)
    written = json.loads((box / "environment.json").read_text())
    (box / "environment.json").write_text(json.dumps({**written, "libraries_missing": {"jax": reason}}))
    grid = {"ops": ["axpy"], "libraries": ["numpy", "jax"], "devices": ["cpu"], "dtypes": ["float32"],
            "sizes": [16], "threads": [1]}
    code, err = run_round(box, grid=grid, settings=SETTINGS)
    assert code == 0, err[-3000:]
    skipped = load_record(box / "raw" / "axpy" / "jax-cpu-float32-n16-t1" / "p1.json")
    assert skipped.status == "skipped" and skipped.reason == reason
    assert load_record(box / "raw" / "axpy" / "numpy-cpu-float32-n16-t1" / "p1.json").ok