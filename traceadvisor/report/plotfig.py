"""Figures as plotly.js JSON (``{"data": [trace, ...], "layout": {...}}``), built without the plotly package.

The report embeds plotly.js and hands it figure JSON; the Python package would only build that JSON, and its
import with its validators (narwhals, numpy) costs a third of a small ``analyze --html``. ``Figure`` keeps the
few calls the report's figures use with plotly's semantics for them: ``update_layout`` merges a dict into an
existing one (a new list replaces an empty one), ``update_xaxes`` / ``update_yaxes`` update the one x / y axis,
``add_annotation`` appends; a trace is a dict with its ``type``. A new figure carries a plotly template read from
the plotly package's own data (``package_data/templates/<name>.json``, what plotly embeds), so the JSON is the
JSON plotly wrote. Values are not validated: a figure function that writes a wrong key gets a wrong chart,
which the browser tests (tests/test_report_browser.py) see.
"""

from __future__ import annotations

import copy
import importlib.util
import json
from functools import cache
from pathlib import Path
from typing import Any

DEFAULT_TEMPLATE = "plotly"  # plotly's own default for a new Figure


@cache
def _template(name: str) -> str:
    spec = importlib.util.find_spec("plotly")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("plotly is needed for its report templates (pip install plotly)")
    path = Path(next(iter(spec.submodule_search_locations))) / "package_data" / "templates" / f"{name}.json"
    return path.read_text(encoding="utf-8")


def load_template(name: str) -> dict[str, Any]:
    """plotly's template ``name`` (``plotly``, ``plotly_white``, ...) as the dict a figure's layout holds."""
    return json.loads(_template(name))


def colorscale(name: str) -> list[list[Any]]:
    """A named plotly colorscale (``Reds``, ``Viridis``, ``Reds_r`` reversed) as the ``[[level, colour], ...]``
    plotly writes for it: the colours of ``plotly.colors`` (a light import), spaced evenly from 0 to 1."""
    from plotly import colors

    base = name[:-2] if name.lower().endswith("_r") else name
    seq = next(
        (
            v
            for mod in (colors.sequential, colors.diverging, colors.cyclical)
            for k, v in vars(mod).items()
            if k.lower() == base.lower() and isinstance(v, list)
        ),
        None,
    )
    if seq is None:
        raise ValueError(f"unknown plotly colorscale {name!r}")
    seq = seq[::-1] if base != name else seq
    d = len(seq) - 1
    return [[i / d, c] for i, c in enumerate(seq)]


# layout lists of objects that plotly leaves out of its JSON when empty
_COMPOUND_ARRAYS = frozenset(("annotations", "shapes", "images", "updatemenus", "sliders", "selections"))


def merge(target: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """plotly's ``update`` of a layout or trace: dicts merge into dicts key by key, a list of dicts merges into
    a non-empty list element by element (longer updates append), anything else replaces; returns ``target``."""
    for k, v in update.items():
        old = target.get(k)
        if isinstance(v, dict) and isinstance(old, dict):
            merge(old, v)
        elif (
            isinstance(v, (list, tuple))
            and isinstance(old, list)
            and old
            and all(isinstance(x, dict) for x in v)
        ):
            for i, x in enumerate(v):
                if i < len(old) and isinstance(old[i], dict):
                    merge(old[i], x)
                else:
                    old.append(copy.deepcopy(x))
        elif v is None or (k in _COMPOUND_ARRAYS and not v):
            target.pop(k, None)  # None (or no shapes, no annotations) unsets a property, as in plotly
        else:
            target[k] = _plain(v)
    return target


def _plain(v: Any) -> Any:
    """A value as the figure holds it: tuples as lists, dicts copied without their unset entries (None or an
    empty dict: plotly drops unset properties, so ``marker={"color": None}`` is no ``marker`` at all)."""
    if isinstance(v, dict):
        out = {k: _plain(x) for k, x in v.items() if x is not None}
        return {k: x for k, x in out.items() if x != {}}
    if isinstance(v, tuple):
        return [_plain(x) for x in v]
    if isinstance(v, list):
        return [_plain(x) if isinstance(x, (dict, tuple, list)) else x for x in v]
    return v


def trace(kind: str, **props: Any) -> dict[str, Any]:
    """A trace of ``kind`` (``scatter``, ``bar``) with ``props``; ``None`` props are left out."""
    out = _plain(props)
    out["type"] = kind
    return out


def Bar(**props: Any) -> dict[str, Any]:  # noqa: N802 - named as plotly's graph object
    return trace("bar", **props)


def Scatter(**props: Any) -> dict[str, Any]:  # noqa: N802 - named as plotly's graph object
    return trace("scatter", **props)


class Figure:
    """A plotly figure as data (list of trace dicts) and layout (dict); see the module docstring."""

    def __init__(
        self, data: dict | list[dict] | None = None, template: str | None = DEFAULT_TEMPLATE
    ) -> None:
        self.data: list[dict[str, Any]] = [data] if isinstance(data, dict) else list(data or [])
        self.layout: dict[str, Any] = {"template": load_template(template)} if template else {}

    def add_trace(self, tr: dict[str, Any]) -> Figure:
        self.data.append(tr)
        return self

    def update_layout(self, update: dict[str, Any] | None = None, **props: Any) -> Figure:
        if "template" in props and isinstance(props["template"], str):
            self.layout["template"] = load_template(props.pop("template"))
        merge(self.layout, {**(update or {}), **props})
        return self

    def update_xaxes(self, **props: Any) -> Figure:
        return self.update_layout(xaxis=props)

    def update_yaxes(self, **props: Any) -> Figure:
        return self.update_layout(yaxis=props)

    def add_annotation(self, **props: Any) -> Figure:
        self.layout.setdefault("annotations", []).append(_plain(props))
        return self

    def to_plotly_json(self) -> dict[str, Any]:
        return {"data": self.data, "layout": self.layout}


def as_json(fig: Figure | dict[str, Any]) -> dict[str, Any]:
    """A figure (a :class:`Figure` or an already plain ``{"data", "layout"}`` dict) as plain data."""
    return fig.to_plotly_json() if isinstance(fig, Figure) else fig
