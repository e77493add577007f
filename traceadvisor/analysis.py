"""Library entry point for analysis: rules + config + options -> AnalysisResult (the CLI only calls this)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from traceadvisor.engine.config import find_config, load_config, parse_cli_options, resolve_options
from traceadvisor.engine.loader import load_rules, select_rules
from traceadvisor.engine.runner import AnalysisResult, analyze
from traceadvisor.trace import Trace


def run_analysis(
    traces: list[Trace],
    *,
    select: Iterable[str] = (),
    ignore: Iterable[str] = (),
    packs: Iterable[str] = (),
    cli_options: Iterable[str] = (),
    config: Path | None = None,
    use_config: bool = True,
    options: dict[str, dict[str, Any]] | None = None,
) -> tuple[AnalysisResult, dict[str, Any]]:
    """Load, select and configure the rules, then analyze ``traces``. Options are layered: rule defaults,
    the config file, ``cli_options`` (``CODE.name=value``), then ``options`` (``{CODE: {name: value}}``)."""
    cfg = load_config(config or (find_config() if use_config else None))
    packs = [*cfg.get("rules", []), *packs]
    rules = load_rules(packs)
    sel = list(select) or list(cfg.get("select", []))
    ign = [*cfg.get("ignore", []), *ignore]
    rules = select_rules(rules, sel, ign)
    file_opts = {k.upper(): v for k, v in (cfg.get("options") or {}).items()}
    cli_opts = parse_cli_options(list(cli_options))
    api_opts = {k.upper(): dict(v) for k, v in (options or {}).items()}
    resolved = {rm.code: resolve_options(rm, file_opts, cli_opts, api_opts) for rm in rules}
    return analyze(traces, rules, resolved), cfg


def analyze_paths(paths: Iterable[str | Path], **kw: Any) -> AnalysisResult:
    """Import and analyze trace files (convenience for library users and tests)."""
    from traceadvisor.importers import load_trace

    return run_analysis([load_trace(p) for p in paths], **kw)[0]
