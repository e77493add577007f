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


def resolve_options(rm: RuleModule, *layers: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Defaults, then config-file options, then command-line options; unknown names are errors."""
    opts = {k: o.default for k, o in rm.rule.options.items()}
    for layer in layers:
        for k, v in (layer.get(rm.code) or layer.get(rm.rule.name) or {}).items():
            if k not in opts:
                raise UsageError(
                    f"rule {rm.code} has no option {k!r}",
                    f"Options: {', '.join(opts) or 'none'} (see `traceadvisor rule {rm.code}`)",
                )
            opts[k] = type(opts[k])(v) if opts[k] is not None and not isinstance(v, type(opts[k])) else v
    return opts
