"""Markdown for a pull request from a :class:`~traceadvisor.compare.Comparison` (rendering only, <= 60,000 chars).

Trace strings go into code spans (GitHub would otherwise read ``kernel<4, ...>`` as HTML) with ``|`` and
backticks neutralised, so a kernel name can neither break a table nor inject markup.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import polars as pl

from traceadvisor.compare import Comparison, fmt_bytes, fmt_ns

MAX_CHARS = 60_000
ROW_LIMITS = (40, 20, 10, 5, 3)  # rows per detail table, tried in turn until the document fits


# ----------------------------------------------------------------------------------------------- cell helpers


def code(s: Any, width: int = 80) -> str:
    """A trace string as an inline code span, safe in a table cell."""
    if s is None or s == "":
        return "-"
    t = " ".join(str(s).split()).replace("`", "'")
    if len(t) > width:
        t = t[: width - 1] + "…"
    return "`" + t.replace("|", "\\|") + "`"


def text(s: Any) -> str:
    """Plain text we wrote (verdict reasons can quote trace names): no markup, no table breaks."""
    if s is None:
        return "-"
    t = " ".join(str(s).split())
    for a, b in (
        ("\\", "\\\\"),
        ("|", "\\|"),
        ("<", "&lt;"),
        (">", "&gt;"),
        ("`", "'"),
        ("*", "\\*"),
        ("_", "\\_"),
        ("[", "\\["),
        ("]", "\\]"),
    ):
        t = t.replace(a, b)
    return t


def ns(v: Any) -> str:
    return "-" if v is None else fmt_ns(v)


def pct_change(b: Any, n: Any) -> str:
    if b is None or n is None or not b:
        return "-"
    return f"{100.0 * (n / b - 1):+.1f}%"


def ratio(r: Any) -> str:
    return "-" if r is None else f"{r:.2f}x"


def num(v: Any, fmt: str = "{:,.0f}") -> str:
    return "-" if v is None else fmt.format(v)


VERDICT_MARK = {
    "better": "✅ better",
    "worse": "❌ worse",
    "same": "➖ same",
    "mixed": "⚠️ mixed",
    "n/a": "n/a",
}


def value(unit: str, v: Any) -> str:
    if v is None:
        return "-"
    if unit == "ns":
        return fmt_ns(v)
    if unit == "bytes":
        return fmt_bytes(v)
    return f"{v:,.0f}"


def table(headers: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


# ----------------------------------------------------------------------------------------------- sections


def _head(c: Comparison) -> str:
    b, n = c.base, c.new
    rows = [
        ["trace", code(b.name, 60), code(n.name, 60)],
        ["format / vendor", f"{text(b.format)} / {text(b.vendor)}", f"{text(n.format)} / {text(n.vendor)}"],
        [
            "devices",
            text(", ".join(b.devices) or "none recorded"),
            text(", ".join(n.devices) or "none recorded"),
        ],
        ["steps", f"{b.steps_total} ({text(b.step_source)})", f"{n.steps_total} ({text(n.step_source)})"],
        ["GPU time (compared steps)", ns(b.gpu_time_ns), ns(n.gpu_time_ns)],
        ["ops matched (share of GPU time)", _share(b.op_coverage), _share(n.op_coverage)],
    ]
    heads = [f"{role}: {text(s.label)}" if s.label != role else role for role, s in (("BASE", b), ("NEW", n))]
    return table(["", *heads], rows)


def _share(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def _headline(c: Comparison) -> str:
    rows = []
    for r in c.headline.iter_rows(named=True):
        rows.append(
            [
                f"**{text(r['metric'])}**",
                value(r["unit"], r["base"]),
                value(r["unit"], r["new"]),
                pct_change(r["base"], r["new"]),
                VERDICT_MARK.get(r["verdict"], text(r["verdict"])),
                text(r["reason"]),
            ]
        )
    return table(["metric", "BASE", "NEW", "change", "verdict", "reason"], rows)


def _categories(c: Comparison, limit: int) -> str:
    n = max(c.aligned_steps, 1)
    rows = []
    for r in c.categories.head(limit + 1).iter_rows(named=True):
        rows.append(
            [
                text(r["category"]),
                ns(r["base_ns"] / n),
                ns(r["new_ns"] / n),
                ratio(r["ratio"]),
                f"{100 * r['base_share']:.1f}% / {100 * r['new_share']:.1f}%",
                ns(None if r["base_time_ns"] is None else r["base_time_ns"] / n),
                ns(None if r["new_time_ns"] is None else r["new_time_ns"] / n),
            ]
        )
    return table(
        [
            "category",
            "BASE per step",
            "NEW per step",
            "NEW/BASE",
            "share of window",
            "BASE kernel time",
            "NEW kernel time",
        ],
        rows,
    )


def _steps(c: Comparison, limit: int) -> str:
    rows = [
        [
            str(r["step"]),
            code(r["base_name"], 40),
            ns(r["base_ns"]),
            code(r["new_name"], 40),
            ns(r["new_ns"]),
            ratio(r["ratio"]),
        ]
        for r in c.steps.head(limit).iter_rows(named=True)
    ]
    return table(["#", "BASE step", "BASE time", "NEW step", "NEW time", "NEW/BASE"], rows)


def _ops(c: Comparison, limit: int) -> str:
    rows = [
        [
            code(r["op"], 60),
            num(r["base_launches"]),
            ns(r["base_gpu_ns"]),
            num(r["new_launches"]),
            ns(r["new_gpu_ns"]),
            ratio(r["ratio"]),
            "yes" if r["matched"] else "no",
        ]
        for r in c.ops.head(limit).iter_rows(named=True)
    ]
    return table(
        ["op", "BASE calls", "BASE GPU time", "NEW calls", "NEW GPU time", "NEW/BASE", "matched"], rows
    )


def _kernels(c: Comparison, limit: int) -> str:
    rows = [
        [
            text(r["category"]),
            code(r["family"], 40),
            f"{text(r['base_library'] or '-')}: {ns(r['base_ns'])}",
            f"{text(r['new_library'] or '-')}: {ns(r['new_ns'])}",
            ratio(r["ratio"]),
            code(r["base_top_short"], 44),
            code(r["new_top_short"], 44),
        ]
        for r in c.kernels.head(limit).iter_rows(named=True)
    ]
    return table(["category", "family", "BASE", "NEW", "NEW/BASE", "BASE top kernel", "NEW top kernel"], rows)


def _gemms(c: Comparison, limit: int) -> str:
    def tf(r: dict[str, Any], p: str) -> str:
        if r[f"{p}_tflops"] is None:
            return "-"
        pk = f" ({r[f'{p}_peak_pct']:.0f}% of peak)" if r.get(f"{p}_peak_pct") is not None else ""
        return f"{r[f'{p}_tflops']:.1f}{pk}"

    rows = [
        [
            code(r["op"], 20),
            f"{r['batch']}x{r['m']}x{r['n']}x{r['k']}",
            text(r["dtype"]),
            text(r["found_in"]),
            num(r["base_calls"]),
            ns(r["base_ns"]),
            tf(r, "base"),
            num(r["new_calls"]),
            ns(r["new_ns"]),
            tf(r, "new"),
            ratio(r["ratio"]),
        ]
        for r in c.gemms.head(limit).iter_rows(named=True)
    ]
    return table(
        [
            "op",
            "BxMxNxK",
            "dtype",
            "in",
            "BASE calls",
            "BASE time",
            "BASE TFLOP/s",
            "NEW calls",
            "NEW time",
            "NEW TFLOP/s",
            "NEW/BASE",
        ],
        rows,
    )


def _copies(c: Comparison, limit: int) -> str:
    def gb(v: Any) -> str:
        return "-" if v is None else f"{v:.3g} GB/s"

    rows = [
        [
            text(r["copy_kind"]),
            text(r["host_memory"]),
            num(r["base_count"]),
            ns(r["base_ns"]),
            gb(r["base_gbps"]),
            num(r["new_count"]),
            ns(r["new_ns"]),
            gb(r["new_gbps"]),
            ns(r["delta_ns"]),
        ]
        for r in c.copies.head(limit).iter_rows(named=True)
    ]
    return table(
        [
            "direction",
            "host memory",
            "BASE count",
            "BASE time",
            "BASE rate",
            "NEW count",
            "NEW time",
            "NEW rate",
            "change",
        ],
        rows,
    )


def _memory(c: Comparison, limit: int) -> str:
    rows = [
        [
            r["side"].upper(),
            str(r["device"]),
            fmt_bytes(r["peak_allocated_bytes"]),
            fmt_bytes(r["peak_reserved_bytes"]),
            fmt_bytes(r["device_memory_bytes"]),
        ]
        for r in c.memory.head(limit).iter_rows(named=True)
    ]
    return table(["side", "device", "peak allocated", "peak reserved", "device memory"], rows)


def _cold(c: Comparison) -> str:
    rows = [
        [
            r["side"].upper(),
            str(r["steps"]),
            ns(r["first_step_ns"]),
            ns(r["median_other_ns"]),
            ns(r["excess_ns"]),
            ns(r["compile_ns"]) if r["compile_spans"] else "-",
            ns(r["module_load_ns"]) if r["module_loads"] else "-",
        ]
        for r in c.cold_start.iter_rows(named=True)
    ]
    return table(
        ["side", "steps", "first step", "median of others", "excess", "compile", "module loading"], rows
    )


def _findings(c: Comparison, limit: int) -> str:
    rows = [
        [
            code(r["rule"], 10),
            text(r["name"]),
            f"**{text(r['status'])}**",
            f"{r['base_count']} / {ns(r['base_impact_ns'])}",
            f"{r['new_count']} / {ns(r['new_impact_ns'])}",
            _share(r.get("predicted_share")),
            _observed(r),
            text(r["note"] or r["summary"]),
        ]
        for r in c.findings.head(limit).iter_rows(named=True)
    ]
    head = ["rule", "name", "status", "BASE count / impact", "NEW count / impact", "predicted (BASE)"]
    return table([*head, "observed (unprofiled)", "summary"], rows)


def _share(v: Any) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def _observed(r: dict[str, Any]) -> str:
    """The saving NEW shows per step, recorded (and with the profiler's host overhead removed)."""
    if r.get("observed_share") is None:
        return "-"
    u = r.get("observed_unprofiled_share")
    return _share(r["observed_share"]) + (f" ({_share(u)})" if u is not None else "")


def _sections(c: Comparison, limit: int) -> list[str]:
    out = [
        f"## traceadvisor compare: {text(c.base.label)} → {text(c.new.label)}",
        "",
        _head(c),
        "",
        "### Verdict",
        "",
        _headline(c),
        "",
    ]
    if c.notes:
        out += [*(f"- {text(n)}" for n in c.notes), ""]
    parts: list[tuple[str, pl.DataFrame, Callable[[], str]]] = [
        (
            "GPU time by category, per step (exclusive busy time + idle = window)",
            c.categories,
            lambda: _categories(c, limit),
        ),
        (f"Aligned steps ({c.aligned_steps})", c.steps, lambda: _steps(c, limit)),
        ("Framework ops and the GPU time they launched", c.ops, lambda: _ops(c, limit)),
        ("Kernel families matched within each category", c.kernels, lambda: _kernels(c, limit)),
        ("GEMM shapes (shapes found in both runs first)", c.gemms, lambda: _gemms(c, limit)),
        ("Host/device copies", c.copies, lambda: _copies(c, limit)),
        ("Memory peaks", c.memory, lambda: _memory(c, limit)),
        ("Cold start", c.cold_start, lambda: _cold(c)),
        ("Findings present in one run and not the other", c.findings, lambda: _findings(c, limit)),
    ]
    for title, df, render in parts:
        if df.height == 0:
            continue
        more = f" — top {limit} of {df.height}" if df.height > limit and title != "Cold start" else ""
        out += [f"<details><summary>{title}{more}</summary>", "", render(), "", "</details>", ""]
    out.append(
        "<sub>Generated by traceadvisor compare. Per-step values are totals over the aligned steps divided "
        "by their count; time per step is the median.</sub>"
    )
    return out


def render_markdown(c: Comparison, max_chars: int = MAX_CHARS) -> str:
    """The comparison as Markdown of at most ``max_chars`` characters (detail tables shrink to fit)."""
    doc = ""
    for limit in ROW_LIMITS:
        doc = "\n".join(_sections(c, limit)) + "\n"
        if len(doc) <= max_chars:
            return doc
    cut = doc[: max_chars - 40].rsplit("\n", 1)[0]
    return cut + "\n\n_(truncated to fit)_\n"
