"""Every key of the config schema given values of the wrong type and shape: each config ends
in success or in one line naming the key, never in another exception (issue 31, item 4)."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from offloadbench.config import ConfigError, inherited_lists, load_schema, validate
from snakemake.utils import update_config

SCHEMA = load_schema()
DEFAULT = yaml.safe_load(Path("config/config.yaml").read_text(encoding="utf-8"))
NODE = "node1"  # a node type under `cluster:`, whose fields the schema gives for any label
OP = "matmul"  # a key of grid.op_max_size


def key_paths(schema: dict, parts: tuple = ()) -> list[tuple]:
    """Every key path of the schema: its named properties, and one made-up key where it
    allows any (a cluster's node type, an op of grid.op_max_size), recursively."""
    found = []
    for key, sub in schema.get("properties", {}).items():
        found += [(*parts, key), *key_paths(sub, (*parts, key))]
    other = schema.get("additionalProperties")
    if isinstance(other, dict):
        key = NODE if other.get("type") == "object" else OP
        found += [(*parts, key), *key_paths(other, (*parts, key))]
    return found


PATHS = key_paths(SCHEMA)

# Wrong types and shapes: text (some that reads as a number or a boolean), numbers out of
# every range, booleans, null, and lists and mappings of them, nested.
ATOMS = st.sampled_from([
    "matmul", "", "abc", "all", "1", "-1", "0", "1e999", "nan", "-inf", "true", "64KiB", "x" * 300,
    0, 1, -1, -5, 7, 10**30, -(10**30), 0.5, -2.5, 1e308, -1e308, float("nan"), float("inf"),
    True, False, None,
])
KEYS = st.sampled_from(["a", "ops", "sizes", "compiled", "matmul", "cpu", "partition", 1, True, None])
VALUES = st.recursive(
    ATOMS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3),
    max_leaves=8,
)


def nested(path: tuple, value) -> dict:
    for key in reversed(path):
        value = {key: value}
    return value


def dotted(path: tuple) -> str:
    return ".".join(map(str, path))


def related(named: str, key: str) -> bool:
    """`named` is `key`, one of its parents, or a part of it (`grid.sizes[1]` of `grid.sizes`)."""
    def within(inner: str, outer: str) -> bool:
        return inner == outer or (inner.startswith(outer) and inner[len(outer)] in ".[")
    return within(key, named) or within(named, key)


def check(written: dict, key: str) -> None:
    """Validate as rules/common.smk does: config/config.yaml with what the user wrote merged in."""
    config = copy.deepcopy(DEFAULT)
    update_config(config, copy.deepcopy(written))
    try:
        validate(config, SCHEMA, inherited=inherited_lists(config, written))
    except ConfigError as error:
        message = str(error)
        assert "\n" not in message and message.isprintable(), message
        named = re.match(r"config key (\S+?):", message)
        assert named, message
        # a check across keys names the other one first (measure.max_samples … below measure.min_samples)
        assert related(named.group(1), key) or key in message, (key, message)


def test_the_walk_reaches_the_nested_keys():
    names = set(map(dotted, PATHS))
    assert {"grid", "grid.compiled.threads", "measure.processes", "analysis.min_effect",
            f"cluster.{NODE}.gpus", f"grid.op_max_size.{OP}", "transfer.link_gbs"} <= names
    assert len(names) > 60


@pytest.mark.parametrize("value", ["matmul", [1, 2], None, 10**30, 1e308, -1, True, [[{"a": []}]], {"a": 1}])
def test_every_key_with_each_wrong_value_is_one_line(value):
    for path in PATHS:
        check(nested(path, value), dotted(path))


@settings(derandomize=True, database=None, deadline=None, max_examples=300)
@given(path=st.sampled_from(PATHS), value=VALUES)
def test_any_value_at_any_key_is_one_line_or_valid(path, value):
    check(nested(path, value), dotted(path))


@settings(derandomize=True, database=None, deadline=None, max_examples=100)
@given(config=VALUES, written=VALUES)
def test_the_inherited_lists_read_anything(config, written):
    assert inherited_lists(config, written) <= {"grid.ops", "grid.modes", *(f"grid.compiled.{k}" for k in
                                                                             ("ops", "devices", "sizes", "threads"))}


@pytest.mark.parametrize("grid, words", [
    ("matmul", "config key grid: 'matmul' is not of type 'object'"),
    ([1, 2], "config key grid: [1, 2] is not of type 'object'"),
    (["1", "2"], "config key grid: ['1', '2'] is not of type 'object'"),  # what --config grid='[1, 2]' gives
])
def test_a_grid_that_is_no_mapping_is_one_line_naming_grid(grid, words):
    written = {"grid": grid}
    config = copy.deepcopy(DEFAULT)
    update_config(config, written)
    with pytest.raises(ConfigError) as error:
        validate(config, inherited=inherited_lists(config, written))
    assert str(error.value) == words


@pytest.mark.parametrize("written, words", [
    ({"grid": {"op_max_size": {1: 5}}}, "config key grid.op_max_size: the key 1 is not a name"),
    ({"cluster": {True: {"gpus": 1}}}, "config key cluster: the key True is not a name"),
    ({"measure": {"budget_s": float("inf")}}, "config key measure.budget_s: inf is not a finite number"),
    ({"measure": {"budget_s": "1e999"}}, "config key measure.budget_s: inf is not a finite number"),
    ({"grid": {"size": [1], 2: 3}}, "config key grid: the key 2 is not a name"),
])
def test_keys_that_are_no_names_and_values_that_are_not_finite_are_one_line(written, words):
    with pytest.raises(ConfigError) as error:
        validate(written)
    assert str(error.value).startswith(words)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    from offloadbench import sandbox

    return sandbox.copy_workflow(tmp_path_factory.mktemp("wf"))


@pytest.mark.parametrize("args", [
    ("--configfile", "bad.yaml"),
    ("--config", "grid=[1, 2]"),
])
def test_snakemake_prints_one_error_line_for_a_grid_that_is_no_mapping(workdir, args):
    from offloadbench import sandbox

    (workdir / "bad.yaml").write_text("grid: matmul\n")
    result = sandbox.snakemake(workdir, "-n", *args, timeout=300)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "Traceback" not in output, output[-3000:]
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith("error: config key grid: "), output[-3000:]
