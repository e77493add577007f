"""The words every output uses for the library summary (``traceadvisor.summary``): one rendering, so the terminal,
Markdown, HTML and compare cannot disagree about the window, steps, busy and idle time."""

from __future__ import annotations

from traceadvisor.summary import Summary
from traceadvisor.units import fmt_duration


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def items(s: Summary) -> list[tuple[str, str]]:
    """(label, value) pairs: analysed window, steps, GPU busy, GPU idle, GPU work outside the window."""
    t = s.totals
    w = t["window_ns"]
    if t["steps"]:
        steps = f"{t['analysed_steps']} analysed"
        if t["warmup_excluded"]:
            steps += f" of {t['steps']} (first left out as warm-up)"
        if t["median_step_ns"] is not None:
            steps += f", median {fmt_duration(t['median_step_ns'])}"
    else:
        steps = "none marked (first to last GPU activity)"
    out = [
        ("window", fmt_duration(w) if w else "no GPU activity"),
        ("steps", steps),
        ("GPU busy", f"{fmt_duration(t['busy_ns'])} ({_pct(t['busy_ns'], w)})"),
        ("GPU idle", f"{fmt_duration(t['idle_ns'])} ({_pct(t['idle_ns'], w)})"),
    ]
    if t["outside_ns"]:
        out.append(("outside the window", f"{fmt_duration(t['outside_ns'])} of GPU work"))
    return out


def line(s: Summary) -> str:
    """The summary in one line of plain text (no markup characters that Markdown or HTML would change)."""
    return " · ".join(f"{k} {v}" for k, v in items(s))
