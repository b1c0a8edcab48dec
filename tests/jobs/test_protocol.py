"""The worker protocol's typed messages: what one end writes, the other reads back as the
same message, and a line of any other form reads as no message at all."""

import json

import pytest
from offloadbench.jobs.protocol import (
    MESSAGES,
    Died,
    Done,
    Finish,
    Forked,
    Prepare,
    Prepared,
    Ready,
    Turn,
    Turned,
    read_message,
)

KEY = "matmul/numpy-cpu-float32-n64-t1"
SAMPLES = [
    Prepare(KEY, "/raw/.partial/p1/x.json", True, {"host": 1.5}, 3, {"round": 1}),
    Turn(KEY, 2, 1, "torch-cpu-t1", 1, 0.05, [101, 102]),
    Finish(KEY, "precise", {"cycles": 4}),
    Ready({"pid": 7, "import_s": 0.4}),
    Forked(KEY, 4242),
    Died(KEY, -9),
    Prepared(KEY, 4242, 2, {"inputs": 0.1}),
    Turned(KEY, False, {"compute": 0.002, "end_to_end": 0.003}),
    Done(KEY, "oom", "out of memory on cuda", {}, True),
]


def decoded(message, token="t0"):
    return json.loads(message.line(token))


def test_every_kind_has_a_sample():
    assert {type(m) for m in SAMPLES} <= set(MESSAGES.values())


@pytest.mark.parametrize("message", SAMPLES, ids=lambda m: type(m).__name__)
def test_a_message_reads_back_as_itself_with_its_token(message):
    data = decoded(message, "abc")
    assert data["token"] == "abc"
    assert read_message(data) == message
    assert message.key == getattr(message, message.tag)


@pytest.mark.parametrize("forged", [
    {"done": KEY, "status": "great", "reason": ""},  # no status of ours
    {"done": KEY, "status": "ok"},  # its reason missing
    {"turned": KEY, "converged": True, "medians": {"compute": "fast"}},  # a median that is no number
    {"turned": KEY, "converged": 1, "medians": {}},  # a number where a truth value goes
    {"prepared": KEY, "pid": True, "regions": 1},  # a truth value where a pid goes
    {"forked": KEY, "pid": "4242"},
    {"done": KEY, "status": "ok", "reason": "", "prepared": KEY},  # two kinds at once
    {"hello": KEY},  # no kind of ours
    {"turn": KEY, "cycle": 1, "after": 5},
])
def test_a_line_of_another_form_is_no_message(forged):
    assert read_message(forged) is None


def test_optional_fields_take_their_defaults():
    assert read_message({"finish": KEY}) == Finish(KEY)
    assert read_message({"done": KEY, "status": "ok", "reason": ""}).replace is False
