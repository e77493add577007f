"""Typed rule options: validated once against the option's type (msgspec), bad values are one-line usage errors
(exit 2), time options reach the rule in nanoseconds too."""

import pytest
from test_bad_input import assert_one_line_error, run

from traceadvisor.engine.config import resolve_options
from traceadvisor.engine.loader import load_rules
from traceadvisor.errors import UsageError

RULES = {rm.code: rm for rm in load_rules()}


@pytest.mark.parametrize(
    "arg,words",
    [
        ("MEM003.min_calls=abc", "option min_calls must be a whole number"),
        ("IDL001.skip_first_step=no", "option skip_first_step must be true or false"),
        ("MEM003.min_calls=2.5", "must be a whole number"),
        ("WRM001.min_total_ms=-1", "must not be negative"),
    ],
)
def test_bad_option_value_is_a_one_line_error(arg, words, tmp_path):
    code, _, err = run("analyze", "--example", "-O", arg, "--json", str(tmp_path / "x.json"))
    assert_one_line_error(code, err, words)


def test_values_are_converted_once_with_nanosecond_twins():
    wrm = RULES["WRM001"]
    opts = resolve_options(wrm, {"WRM001": {"min_total_ms": 2, "first_step_factor": 3}})
    assert opts["min_total_ms"] == 2.0 and isinstance(opts["min_total_ms"], float)
    assert opts["min_total_ns"] == 2_000_000 and opts["first_step_factor"] == 3.0
    assert "first_step_factor_ns" not in opts  # not a time unit
    assert wrm.rule.defaults()["first_call_min_ns"] == 1_000_000
    idl = RULES["IDL001"]
    assert resolve_options(idl, {"IDL001": {"skip_first_step": False}})["skip_first_step"] is False
    with pytest.raises(UsageError):
        resolve_options(idl, {"IDL001": {"skip_first_step": "false"}})  # a string is no boolean
