import ast
import dataclasses
import json
import re
from pathlib import Path

import pytest
import yaml
from offloadbench.config import ConfigError, load_schema, validate

ROOT = Path(__file__).resolve().parents[2]


def test_empty_config_gets_every_default():
    config = validate({})
    assert config["machine"] == "auto"
    assert config["grid"]["sizes"] == [128, 256, 512, 1024, 2048]
    assert config["grid"]["threads"] == [1, "all"]
    assert config["measure"]["target_rel_ci"] == 0.02
    assert config["analysis"]["bootstrap_resamples"] == 2000


def test_the_default_config_file_is_valid():
    import yaml

    with open("config/config.yaml", encoding="utf-8") as handle:
        config = validate(yaml.safe_load(handle))
    assert set(config["grid"]["devices"]) == {"cpu", "cuda", "mps"}
    assert max(config["grid"]["sizes"]) <= 2048


@pytest.mark.parametrize(
    "config, key, words",
    [
        ({"grid": {"sizes": [128, -5]}}, "grid.sizes[1]", "minimum"),
        ({"grid": {"sizes": "big"}}, "grid.sizes", "not of type"),
        ({"grid": {"ops": ["fft"]}}, "grid.ops[0]", "'fft'"),
        ({"grid": {"threads": [1, "many"]}}, "grid.threads[1]", "positive integer or \"all\""),
        ({"grid": {"size": [1]}}, "grid", "unknown key 'size'"),
        ({"grid": {"devices": []}}, "grid.devices", "non-empty"),
        ({"measure": {"target_rel_ci": 0}}, "measure.target_rel_ci", "less than or equal to"),
        ({"measure": {"min_samples": 50, "max_samples": 20}}, "measure.max_samples", "below"),
        ({"machine": "my/box"}, "machine", "does not match"),
        ({"measure": {"pinned_memory": "yes"}}, "measure.pinned_memory", "boolean"),
        ({"grid": {"op_max_size": {"eig": 4096}}}, "grid.op_max_size.eig", "did you mean 'eigh'"),
    ],
)
def test_invalid_configs_name_the_key_in_one_line(config, key, words):
    with pytest.raises(ConfigError) as error:
        validate(config)
    message = str(error.value)
    assert f"config key {key}:" in message
    assert words in message
    assert "\n" not in message


def test_measure_settings_reach_the_timer():
    from offloadbench.measure.settings import Settings

    config = validate({"measure": {"budget_s": 3.5, "pinned_memory": True, "min_sample_s": 0.002}})
    section = config["measure"]
    settings = Settings.from_config(section, config["compile"])
    assert settings.stop.budget_s == 3.5 and settings.pinned_memory is True and settings.block.min_sample_s == 0.002
    assert section["processes"] == 3


def test_the_schema_describes_every_op_of_the_catalogue_and_no_other():
    from offloadbench.catalogue import SPECS
    from offloadbench.config import load_schema

    text = load_schema()["properties"]["grid"]["properties"]["ops"]["description"]
    described = {line.split(":")[0].strip() for line in text.splitlines()[2:] if ":" in line}
    assert described - {"a user kernel"} == set(SPECS)


def test_a_size_too_small_for_an_op_is_refused_naming_the_op(monkeypatch):
    from offloadbench import catalogue

    monkeypatch.setitem(catalogue.SPECS, "matmul", dataclasses.replace(catalogue.SPECS["matmul"], min_size=3))
    with pytest.raises(ConfigError) as error:
        validate({"grid": {"ops": ["matmul"], "sizes": [64, 2]}})
    message = str(error.value)
    assert message.startswith("config key grid.sizes[1]: 2 is too small: op matmul needs n ≥ 3") and "\n" not in message


def test_nested_command_line_overrides_get_the_schema_types():
    # What `snakemake --config grid='{"sizes": [256, 512], "threads": [1, all]}'` passes in.
    config = validate({"grid": {"sizes": ["256", "512"], "threads": ["1", "all"]},
                       "measure": {"budget_s": "0.5", "pinned_memory": "true"}})
    assert config["grid"]["sizes"] == [256, 512]
    assert config["grid"]["threads"] == [1, "all"]
    assert config["measure"]["budget_s"] == 0.5 and config["measure"]["pinned_memory"] is True
    with pytest.raises(ConfigError, match=r"config key grid.sizes\[0\]: 0 is less than the minimum of 1"):
        validate({"grid": {"sizes": ["0"]}})


def test_overrides_of_keys_the_user_names_get_the_schema_types_and_defaults():
    # The SLURM profile's own example: --config cluster='{a100: {partition: gpu, gpus: 1}}'
    config = validate({"cluster": {"a100": {"partition": "gpu", "gpus": "1"}},
                       "grid": {"ops": ["matmul", "eigh"], "op_max_size": {"eigh": "64"}}})
    assert config["cluster"]["a100"] == {"partition": "gpu", "gpus": 1, "mem_mb": 16000}
    assert config["grid"]["op_max_size"] == {"eigh": 64}


def test_provenance_lists_the_users_blas_variables_not_those_libraries_set(monkeypatch):
    from offloadbench.measure import threads

    monkeypatch.setitem(threads.STARTUP_ENV, "OPENBLAS_CORETYPE", "Haswell")
    monkeypatch.setenv("KMP_DUPLICATE_LIB_OK", "True")  # set by a library after start-up
    monkeypatch.delitem(threads.STARTUP_ENV, "KMP_DUPLICATE_LIB_OK", raising=False)
    env = threads.blas_tuning_env()
    assert env.get("OPENBLAS_CORETYPE") == "Haswell"
    assert "KMP_DUPLICATE_LIB_OK" not in env
    assert not any(key.endswith("_NUM_THREADS") for key in env)  # set per cell, recorded per cell


# --- lists inherited from config/config.yaml -------------------------------------------------

DEFAULT = __import__("yaml").safe_load(Path("config/config.yaml").read_text(encoding="utf-8"))


def merged(written: dict) -> dict:
    """What Snakemake hands the Snakefile: config/config.yaml with the user's keys merged in."""
    from snakemake.utils import update_config

    config = __import__("copy").deepcopy(DEFAULT)
    update_config(config, written)
    return config


def test_only_lists_the_user_left_unset_are_inherited():
    from offloadbench.config import inherited_lists

    assert inherited_lists(merged({"kernels": []}), {"kernels": []}) == {
        "grid.ops", "grid.modes", "grid.compiled.ops", "grid.compiled.sizes", "grid.compiled.threads"}
    mine = {"grid": {"ops": ["matmul"], "modes": ["eager", "compiled"], "compiled": {"ops": ["matmul"]}}}
    assert inherited_lists(merged(mine), mine) == {"grid.compiled.sizes", "grid.compiled.threads"}
    replaced = {"grid": {"ops": ["matmul"], "modes": ["eager"], "compiled": None}}
    assert inherited_lists(merged(replaced), replaced) == set()
    assert inherited_lists(merged({}), DEFAULT) == set()  # `--configfile config/config.yaml`: all of it written


def validated(written: dict):
    from offloadbench.config import inherited_lists

    config = merged(written)
    notes: list[str] = []
    return validate(config, inherited=inherited_lists(config, written), notes=notes), notes


def test_kernels_of_ones_own_never_fail_on_the_default_files_names(tmp_path):
    data, notes = validated({"kernels": []})
    assert "heat_step" not in data["grid"]["ops"] and data["grid"]["compiled"]["ops"] == ["transcendental"]
    assert len(notes) == 2 and all(n.startswith("config key grid.") and "config/config.yaml" in n for n in notes)
    own = tmp_path / "own.py"
    own.write_text("from offloadbench import kernel\n\n@kernel\ndef smooth(xp, u):\n    return 0.5 * u\n")
    data, notes = validated({"kernels": [str(own)], "grid": {"ops": ["smooth", "matmul"], "modes": ["eager", "compiled"]}})
    assert data["grid"]["compiled"]["ops"] is None and data["grid"]["compiled"]["threads"] == [1]  # all ops, 1 thread
    assert len(notes) == 1 and "all of them are compiled" in notes[0]
    # a grid of its own that leaves the modes to the default file: it asked for no compile of its own
    data, notes = validated({"kernels": [str(own)], "grid": {"ops": ["smooth", "matmul"]}})
    assert data["grid"]["compiled"]["ops"] == [] and "so none is compiled" in notes[0]


def test_a_name_the_user_wrote_is_still_checked():
    with pytest.raises(ConfigError, match=r"grid.compiled.ops\[0\]: unknown op 'heat_stp'"):
        validated({"kernels": [], "grid": {"compiled": {"ops": ["heat_stp"]}}})
    with pytest.raises(ConfigError, match=r"grid.ops\[0\]: unknown op 'heat_step'"):
        validated({"kernels": [], "grid": {"ops": ["heat_step"]}})


@pytest.mark.parametrize("name, text", [
    ("readme", None),  # the README's own example config, as it stands
    ("no-kernels", "kernels: []\n"),
    ("own-kernels", "kernels: [my_kernels.py]\ngrid:\n  ops: [smooth_rows, matmul]\n  modes: [eager, compiled]\n"),
])
def test_natural_configs_plan_through_snakemake(tmp_path, name, text):
    """The README's example config, `kernels: []`, and a config that names its own kernels
    and both modes but no grid.compiled: each plans its run without an error."""
    import re

    from offloadbench import sandbox

    workdir = sandbox.copy_workflow(tmp_path / "wf")
    readme = (sandbox.ROOT / "README.md").read_text()
    kernel = re.search(r"```python\n# my_kernels.py\n(.*?)```", readme, re.DOTALL).group(1)
    text = text or re.search(r"```yaml\n(# mine.yaml.*?)```", readme, re.DOTALL).group(1)
    (workdir / "my_kernels.py").write_text(kernel)
    (workdir / "mine.yaml").write_text(text)
    result = sandbox.snakemake(workdir, "-n", "--configfile", "mine.yaml", timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "error:" not in result.stderr and "Job stats" in result.stdout + result.stderr


def test_the_config_reference_is_generated_from_the_schema(tmp_path):
    """config/README.md's key tables are the schema's descriptions (tools/config-reference.py):
    current as committed, and refused once a row no longer says what the schema says."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("config_reference", Path(__file__).resolve().parents[2] / "tools" / "config-reference.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    assert tool.main(["--check"]) == 0
    stale = tmp_path / "README.md"
    stale.write_text(tool.README.read_text().replace("| Shortest sample in seconds.", "| Shortest sample."))
    tool.README = stale
    assert tool.main(["--check"]) == 1
    tool.main([])
    assert "| Shortest sample in seconds." in stale.read_text()
    assert tool.first_sentence("Most samples (at most 9; e.g. 3). More.") == "Most samples (at most 9; e.g. 3)."


def schema_defaults() -> dict[str, object]:
    """Each key of the config schema that has a default of its own (a leaf), with it."""
    schema = yaml.safe_load((ROOT / "workflow" / "schemas" / "config.schema.yaml").read_text())
    found = {}

    def walk(node):
        for key, value in (node.get("properties") or {}).items():
            if isinstance(value, dict):
                if "default" in value and not isinstance(value["default"], dict):
                    found[key] = value["default"]
                walk(value)

    walk(schema)
    return found


def restated_defaults(path: Path, keys) -> list[str]:
    """`settings.get("min_cycles", 4)`-like reads of a config section (a name ending in
    settings or section) that give a schema key a default of their own."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                and ast.unparse(node.func.value).endswith(("settings", "section")) and len(node.args) == 2
                and isinstance(node.args[0], ast.Constant) and node.args[0].value in keys
                and not (isinstance(node.args[1], ast.Constant) and node.args[1].value is None)):
            found.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_code_restates_a_default_the_schema_gives():
    """The validated config holds every key with its default; a job that reads a section
    with a fallback of its own would drift from the schema unseen."""
    keys = schema_defaults()
    assert {"min_cycles", "extra_time_fraction", "turn_s", "cold_cache"} <= set(keys)
    found = [line for path in sorted((ROOT / "workflow" / "offloadbench").rglob("*.py"))
             for line in restated_defaults(path, keys)]
    assert found == []


def test_the_restated_default_check_finds_one(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("def f(self, row):\n    return self.settings.get('min_cycles', 4), row.get('min_cycles', 1)\n")
    assert restated_defaults(sample, schema_defaults()) == ["sample.py:2: self.settings.get('min_cycles', 4)"]


def test_the_settings_defaults_are_the_schemas():
    """`Settings()` (what the tests build) holds the same values as the schema's defaults."""
    from offloadbench.measure.settings import Settings

    config = validate({}, read_kernels=False)
    assert Settings() == Settings.from_config(config["measure"], config["compile"])


def test_the_run_settings_hold_every_key_of_the_two_sections_and_read_back_what_was_written(tmp_path):
    """settings.json is the one source of the measure and compile settings: its typed fields are
    the schema's keys (a key added to the schema must be added there), and a file written is
    read back as the same object."""
    from offloadbench.run_settings import CompileSection, MeasureSection, RunSettings

    schema = load_schema()["properties"]
    for name, kind in (("measure", MeasureSection), ("compile", CompileSection)):
        assert {f.name for f in dataclasses.fields(kind)} == set(schema[name]["properties"]), name
    config = validate({"measure": {"resident_calls": [1, 4], "pause_s": 0.5}, "compile": {"cold_cache": False}},
                      read_kernels=False)
    run = RunSettings.from_config(config)
    run.write(tmp_path / "settings.json")
    assert RunSettings.read(tmp_path / "settings.json") == run
    assert run.measure.resident_calls == (1, 4) and run.measure.pause_s == 0.5 and not run.compile.cold_cache


@pytest.mark.parametrize("content, said", [
    ("{", "not valid JSON"),
    ('{"measure": {}, "compile": {}}', "not a settings file of version 1"),
    ("[1]", "not a settings file"),
    ("wrong type", "measure.budget_s: 'fast' is not of type 'number'"),
    ("missing key", "its measure section does not hold the keys of this version"),
    ("extra key", "compile: Additional properties are not allowed"),
])
def test_a_bad_settings_file_is_one_line_naming_it(tmp_path, content, said):
    from offloadbench.run_settings import RunSettings, SettingsFileError

    good = RunSettings.from_config(validate({}, read_kernels=False)).as_json()
    edits = {"wrong type": lambda d: d["measure"].update(budget_s="fast"),
             "missing key": lambda d: d["measure"].pop("turn_s"),
             "extra key": lambda d: d["compile"].update(fullgraph=True)}
    if content in edits:
        edits[content](good)
        content = json.dumps(good)
    path = tmp_path / "settings.json"
    path.write_text(content)
    with pytest.raises(SettingsFileError) as error:
        RunSettings.read(path)
    message = str(error.value)
    assert "\n" not in message and str(path) in message and said in message, message


def test_only_the_settings_rule_hands_the_measure_and_compile_sections_to_a_job():
    """Every job that measures reads settings.json: no rule passes the measure or compile section
    on a command line again, and no job parses one from a --compile argument."""
    rules = {path.name: path.read_text() for path in (ROOT / "workflow" / "rules").glob("*.smk")}
    passing = [f"{name}: {line.strip()}" for name, text in rules.items() for line in text.splitlines()
               if re.search(r'config\["(measure|compile)"\]\s*[,)]', line) and "params" not in line]
    assert passing == ['measure.smk: measure=config["measure"],', 'measure.smk: compile=config["compile"],']
    jobs = ROOT / "workflow" / "offloadbench" / "jobs"
    assert [p.name for p in jobs.glob("*.py") if '"--compile"' in p.read_text()] == []
