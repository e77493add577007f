"""Finding rule files (built-in pack and user packs), loading them by path, and selecting by code/prefix/name."""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from traceadvisor.engine.rule import SECTIONS, Rule, RuleModule, doc_sections
from traceadvisor.errors import UsageError


def builtin_pack() -> Path:
    """The built-in rule pack: ``traceadvisor/rules`` in an installed wheel, the repository's ``rules/`` folder
    beside the package in a checkout (the wheel maps one to the other; it never installs a top-level ``rules``)."""
    import traceadvisor

    pkg = Path(traceadvisor.__file__).resolve().parent
    installed = pkg / "rules"
    return installed if installed.is_dir() else pkg.parent / "rules"


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


def _pack_files(extra_packs: Iterable[str | Path], builtin: bool) -> Iterator[Path]:
    packs = ([builtin_pack()] if builtin else []) + [Path(p) for p in extra_packs]
    for pack in packs:
        if not pack.is_dir():
            raise UsageError(f"rule pack {pack} is not a folder", "Pass a folder of rule files to --rules")
        yield from rule_files(pack)


def _unique(items: Iterable[tuple[str, str, object]]) -> list:
    """Items ``(code, path, value)``: the values sorted by code; a code defined twice is an error."""
    seen: dict[str, tuple[str, object]] = {}
    for code, path, value in items:
        if code in seen:
            raise UsageError(
                f"rule code {code} is defined twice ({seen[code][0]} and {path})",
                "Give each rule its own code",
            )
        seen[code] = (path, value)
    return [seen[c][1] for c in sorted(seen)]


def load_rules(extra_packs: Iterable[str | Path] = (), builtin: bool = True) -> list[RuleModule]:
    return _unique((rm.code, rm.path, rm) for rm in (load_file(f) for f in _pack_files(extra_packs, builtin)))


@dataclass(frozen=True)
class RuleHeader:
    """What ``traceadvisor rules`` lists about a rule."""

    code: str
    name: str
    title: str
    needs: tuple[str | tuple[str, ...], ...]
    path: str


_HEADER_FIELDS = ("code", "name", "title", "needs")


def peek_file(path: Path) -> RuleHeader:
    """The header of a rule file read from its source, without running it (no polars import: the rule list
    prints in a fraction of the time). A file whose ``RULE = Rule(...)`` does not spell code, name, title and
    needs as literals, or that has no ``detect``, is loaded instead (which also reports what is wrong)."""
    try:
        src = path.read_text(encoding="utf-8")
        fields = _literal_rule(_rule_statement(src)) if _DETECT.search(src) else None
    except (OSError, SyntaxError, ValueError):
        fields = None
    if fields is None:
        r = load_file(path).rule
        return RuleHeader(r.code, r.name, r.title, tuple(r.needs), str(path))
    return RuleHeader(**fields, path=str(path))


_RULE_START = re.compile(r"^RULE\s*=\s*Rule\(", re.MULTILINE)
_DETECT = re.compile(r"^def detect\(", re.MULTILINE)


def _rule_statement(src: str) -> ast.Module:
    """The ``RULE = Rule(...)`` statement parsed alone (a formatted call ends at a line holding only ")"),
    which is much less than the whole file with its long docstring; else the whole file."""
    m = _RULE_START.search(src)
    end = src.find("\n)\n", m.start()) if m else -1
    if m and end > 0:
        try:
            return ast.parse(src[m.start() : end + 2])
        except SyntaxError:
            pass
    return ast.parse(src)


def _literal_rule(tree: ast.Module) -> dict | None:
    for node in tree.body:
        if not (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "RULE" for t in node.targets)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name)
            and node.value.func.id == "Rule"
            and not node.value.args
        ):
            continue
        kws = {k.arg: k.value for k in node.value.keywords}
        try:
            out = {k: ast.literal_eval(kws[k]) for k in _HEADER_FIELDS if k in kws}
        except ValueError:
            return None
        out.setdefault("needs", ())
        ok = all(isinstance(out.get(k), str) for k in _HEADER_FIELDS[:3]) and isinstance(out["needs"], tuple)
        return out if ok else None
    return None


def rule_headers(extra_packs: Iterable[str | Path] = (), builtin: bool = True) -> list[RuleHeader]:
    """``load_rules``'s rules as headers read from their source (see ``peek_file``), sorted by code."""
    return _unique((h.code, h.path, h) for h in (peek_file(f) for f in _pack_files(extra_packs, builtin)))


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
