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
        why = [
            w
            for w, on in (
                ("first left out as warm-up", t["warmup_excluded"]),
                ("last left out as a partial step", t.get("partial_excluded")),
            )
            if on
        ]
        if why:
            steps += f" of {t['steps']} ({'; '.join(why)})"
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


def roofline_rows(s: Summary, top: int = 10) -> list[dict[str, str]]:
    """The per-op roofline's op groups (most GPU time first) as display strings."""
    ops = (s.roofline or {}).get("ops") or []
    return [
        {
            "op": f"{o['op'].removeprefix('aten::')} {o['shapes']}",
            "dtype": o["dtype"],
            "calls": str(o["calls"]),
            "GPU time": fmt_duration(int(o["gpu_ms"] * 1e6)),
            "achieved": f"{o['tflops']:.1f} TFLOP/s, {o['tbps']:.2f} TB/s",
            "roofline": f"{o['pct_of_roofline']:.0f}% ({o['bound']}-bound)",
        }
        for o in ops[:top]
    ]


def roofline_line(s: Summary) -> str | None:
    """Per op family: its share of the roofline (roofline time / GPU time) and GPU time, in one line."""
    fams = (s.roofline or {}).get("families") or []
    if not fams:
        return None
    parts = [
        f"{f['family']} {f['pct_of_roofline']:.0f}% of roofline ({fmt_duration(int(f['gpu_ms'] * 1e6))})"
        for f in fams
    ]
    return "per-op roofline: " + ", ".join(parts)
