"""Rule options and selection from ``[tool.traceadvisor]`` (pyproject.toml) or ``traceadvisor.toml``.

[tool.traceadvisor]
select = ["MEM", "GEM001"]
ignore = ["LNC001"]
rules = ["my_rules/"]          # extra rule packs, relative to the file
fail-on = "high"
[tool.traceadvisor.options.GEM001]
low_utilization = 0.4
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import msgspec

from traceadvisor.engine.rule import RuleModule
from traceadvisor.errors import UsageError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def find_config(start: Path | None = None) -> Path | None:
    d = (start or Path.cwd()).resolve()
    for p in [d, *d.parents]:
        t = p / "traceadvisor.toml"
        if t.is_file():
            return t
        pp = p / "pyproject.toml"
        if pp.is_file():
            try:
                if "traceadvisor" in tomllib.loads(pp.read_text()).get("tool", {}):
                    return pp
            except (tomllib.TOMLDecodeError, OSError):
                continue
    return None


def load_config(path: Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    try:
        data = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, OSError) as e:
        raise UsageError(f"cannot read config {path}: {e}", "Fix the TOML syntax") from e
    cfg = data.get("tool", {}).get("traceadvisor", {}) if path.name == "pyproject.toml" else data
    cfg = dict(cfg)
    if "rules" in cfg:
        cfg["rules"] = [str((path.parent / r).resolve()) for r in cfg["rules"]]
    return cfg


def parse_cli_options(pairs: tuple[str, ...] | list[str]) -> dict[str, dict[str, Any]]:
    """``CODE.option=value`` strings -> {CODE: {option: value}} (values parsed as TOML scalars)."""
    out: dict[str, dict[str, Any]] = {}
    for p in pairs:
        if "=" not in p or "." not in p.split("=", 1)[0]:
            raise UsageError(
                f"bad --option {p!r}", "Use CODE.option=value, e.g. --option GEM001.low_utilization=0.4"
            )
        k, v = p.split("=", 1)
        code, opt = k.split(".", 1)
        try:
            val = tomllib.loads(f"v = {v}")["v"]
        except tomllib.TOMLDecodeError:
            val = v
        out.setdefault(code.upper(), {})[opt] = val
    return out


def _type_word(t: Any) -> str:
    return {bool: "true or false", int: "a whole number", float: "a number", str: "a string"}.get(t, str(t))


def check_option(rm: RuleModule, name: str, value: Any) -> Any:
    """``value`` converted to the option's type (msgspec, strict: "abc" is no number, "no" is no boolean);
    numbers must not be negative. A bad value is a ``UsageError``."""
    opt = rm.rule.options[name]
    t = opt.value_type
    try:
        got = msgspec.convert(value, t)
    except msgspec.ValidationError:
        raise UsageError(
            f"rule {rm.code} option {name} must be {_type_word(t)} ({opt.unit}), not {value!r}",
            f"Use e.g. -O {rm.code}.{name}={str(opt.default).lower() if t is bool else opt.default}",
        ) from None
    if isinstance(got, (int, float)) and not isinstance(got, bool) and got < 0:
        raise UsageError(
            f"rule {rm.code} option {name} must not be negative, not {value!r}",
            f"Use a value of 0 or more ({opt.unit}); the default is {opt.default}",
        )
    return got


def with_ns(rule, opts: dict[str, Any]) -> dict[str, Any]:
    """``opts`` plus ``<name>_ns`` for every option in a time unit: units are converted once, here."""
    from traceadvisor.units import to_ns

    out = dict(opts)
    for k, o in rule.options.items():
        key = o.ns_key(k)
        if key and out.get(k) is not None and key not in rule.options:
            out[key] = to_ns(out[k], o.unit)
    return out


def resolve_options(rm: RuleModule, *layers: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Defaults, then config-file options, then command-line options, each value validated against the option's
    type; unknown names and bad values are errors. Time options also come in nanoseconds (``with_ns``)."""
    opts = {k: o.default for k, o in rm.rule.options.items()}
    for layer in layers:
        for k, v in (layer.get(rm.code) or layer.get(rm.rule.name) or {}).items():
            if k not in opts:
                raise UsageError(
                    f"rule {rm.code} has no option {k!r}",
                    f"Options: {', '.join(opts) or 'none'} (see `traceadvisor rule {rm.code}`)",
                )
            opts[k] = check_option(rm, k, v)
    return with_ns(rm.rule, opts)
