"""Finding rule files (built-in pack and user packs), loading them by path, and selecting by code/prefix/name."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterable
from pathlib import Path

from traceadvisor.engine.rule import SECTIONS, Rule, RuleModule, doc_sections
from traceadvisor.errors import UsageError


def builtin_pack() -> Path:
    """The ``rules/`` folder shipped beside the ``traceadvisor`` package (in the repo and in the wheel)."""
    import traceadvisor

    return Path(traceadvisor.__file__).resolve().parent.parent / "rules"


def rule_files(pack: Path) -> list[Path]:
    return sorted(p for p in pack.rglob("*.py") if p.name[:3].isalpha() and p.name[3:6].isdigit())


def load_file(path: Path) -> RuleModule:
    modname = f"traceadvisor_rules.{path.stem}"
    if modname in sys.modules and getattr(sys.modules[modname], "__file__", None) == str(path):
        mod = sys.modules[modname]
    else:
        spec = importlib.util.spec_from_file_location(modname, path)
        if spec is None or spec.loader is None:
            raise UsageError(f"cannot load rule file {path}", "Check that it is a Python file")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[modname] = mod
        try:
            spec.loader.exec_module(mod)
        except Exception as e:  # noqa: BLE001
            del sys.modules[modname]
            raise UsageError(
                f"rule file {path} failed to import: {type(e).__name__}: {e}", "Fix the rule file"
            ) from e
    rule = getattr(mod, "RULE", None)
    if not isinstance(rule, Rule) or not callable(getattr(mod, "detect", None)):
        raise UsageError(
            f"{path} is not a rule file (needs RULE = Rule(...) and detect())",
            "See `traceadvisor rule --help` for the rule-file contract",
        )
    return RuleModule(rule=rule, module=mod, path=str(path))


def load_rules(extra_packs: Iterable[str | Path] = (), builtin: bool = True) -> list[RuleModule]:
    packs = ([builtin_pack()] if builtin else []) + [Path(p) for p in extra_packs]
    seen: dict[str, RuleModule] = {}
    for pack in packs:
        if not pack.is_dir():
            raise UsageError(f"rule pack {pack} is not a folder", "Pass a folder of rule files to --rules")
        for f in rule_files(pack):
            rm = load_file(f)
            if rm.code in seen:
                raise UsageError(
                    f"rule code {rm.code} is defined twice ({seen[rm.code].path} and {f})",
                    "Give each rule its own code",
                )
            seen[rm.code] = rm
    return sorted(seen.values(), key=lambda r: r.code)


def _matches(rm: RuleModule, token: str) -> bool:
    t = token.strip()
    return bool(t) and (
        rm.code.upper().startswith(t.upper()) or rm.rule.name == t.lower() or t.upper() == "ALL"
    )


def select_rules(
    rules: list[RuleModule], select: Iterable[str] = (), ignore: Iterable[str] = ()
) -> list[RuleModule]:
    sel = [s for x in select for s in str(x).split(",") if s.strip()]
    ign = [s for x in ignore for s in str(x).split(",") if s.strip()]
    for tok in sel + ign:
        if not any(_matches(r, tok) for r in rules):
            raise UsageError(f"no rule matches {tok!r}", "Run `traceadvisor rules` to list codes and names")
    out = [r for r in rules if (not sel or any(_matches(r, s) for s in sel))]
    return [r for r in out if not any(_matches(r, s) for s in ign)]


def find_rule(code: str, extra_packs: Iterable[str | Path] = ()) -> RuleModule:
    for r in load_rules(extra_packs):
        if r.code.upper() == code.upper() or r.rule.name == code.lower():
            return r
    raise UsageError(f"no rule {code!r}", "Run `traceadvisor rules` to list codes and names")


def check_doc(rm: RuleModule) -> list[str]:
    """Contract problems of a rule's docstring (missing sections)."""
    secs = doc_sections(rm.doc)
    return [s for s in SECTIONS if not secs.get(s)]
