"""Verdicts: the headline rows (time per step, idle, kernels, copies, memory, cold start, findings)."""

from __future__ import annotations

from typing import Any

import polars as pl

from traceadvisor import units
from traceadvisor.compare.model import SideInfo
from traceadvisor.compare.names import SAME

# --------------------------------------------------------------------------------------------------------------
# Verdicts
# --------------------------------------------------------------------------------------------------------------


def fmt_ns(ns: float | int | None) -> str:
    return units.fmt_duration(ns, missing="-")


def fmt_bytes(b: float | int | None) -> str:
    return units.fmt_bytes(b, missing="-")


def _times(r: float) -> str:
    return f"{r:.0f}x" if r >= 10 else f"{r:.1f}x"


def _speed(ratio: float | None, new_label: str, noun: str = "") -> str:
    """'2.3x slower on MI300X' (ratio = new/base time)."""
    if ratio is None or ratio <= 0:
        return "not comparable"
    if abs(ratio - 1) < SAME:
        return f"{noun}same speed on {new_label}".strip()
    if ratio > 1:
        return f"{noun}{_times(ratio)} slower on {new_label}".strip()
    return f"{noun}{_times(1 / ratio)} faster on {new_label}".strip()


def _verdict_word(ratio: float | None, lower_is_better: bool = True) -> str:
    if ratio is None:
        return "n/a"
    if abs(ratio - 1) < SAME:
        return "same"
    worse = ratio > 1 if lower_is_better else ratio < 1
    return "worse" if worse else "better"


def _side_kernel(row: dict[str, Any], side: str) -> str:
    """'hipBLASLt/Tensile Cijk_...' or, for framework kernels, the family name."""
    lib = (row.get(f"{side}_library") or "").split(", ")[0]
    if lib in ("", "other", "PyTorch native", "copy engine", "memset"):
        return row["family"]
    return f"{lib} {row.get(f'{side}_top_short') or row['family']}"


def _category_reason(
    cat: str, kernels: pl.DataFrame, categories: pl.DataFrame, base: SideInfo, new: SideInfo
) -> str:
    """E.g. 'attention 2.3x slower on MI300X: AOTriton attn_fwd vs FlashAttention flash_fwd_kernel'."""
    row = categories.filter(pl.col("category") == cat)
    if row.height == 0:
        return ""
    r = row.row(0, named=True)
    if cat == "idle":
        return f"GPU idle {fmt_ns(r['base_ns'])} → {fmt_ns(r['new_ns'])}"
    if not r["base_ns"] and not r["base_time_ns"]:
        return f"{cat} only on {new.label} ({fmt_ns(r['new_time_ns'])})"
    if not r["new_ns"] and not r["new_time_ns"]:
        return f"{cat} only on {base.label} ({fmt_ns(r['base_time_ns'])})"
    ratio = r["new_time_ns"] / r["base_time_ns"] if r["base_time_ns"] else None
    text = f"{cat} {_speed(ratio, new.label)}"
    k = kernels.filter(pl.col("category") == cat)
    if k.height == 0:
        return text
    top = k.sort(pl.col("delta_ns").abs(), descending=True).row(0, named=True)
    b, n = _side_kernel(top, "base"), _side_kernel(top, "new")
    if not top["base_count"]:
        return f"{text}: {n} only on {new.label} ({fmt_ns(top['new_ns'])})"
    if not top["new_count"]:
        return f"{text}: {b} only on {base.label} ({fmt_ns(top['base_ns'])})"
    if b != n:
        return f"{text}: {n} vs {b}"
    return f"{text}: {top['family']} {fmt_ns(top['base_ns'])} → {fmt_ns(top['new_ns'])}"


HEADLINE_SCHEMA = {
    "metric": pl.String,
    "unit": pl.String,
    "base": pl.Float64,
    "new": pl.Float64,
    "delta": pl.Float64,
    "ratio": pl.Float64,
    "verdict": pl.String,
    "reason": pl.String,
}


def _row(
    metric: str, unit: str, b: float | None, n: float | None, reason: str, verdict: str | None = None
) -> dict[str, Any]:
    ratio = (n / b) if (b and n is not None and b > 0) else None
    return {
        "metric": metric,
        "unit": unit,
        "base": None if b is None else float(b),
        "new": None if n is None else float(n),
        "delta": (n - b) if (b is not None and n is not None) else None,
        "ratio": ratio,
        "verdict": verdict or _verdict_word(ratio),
        "reason": reason,
    }


def _median(s: pl.Series) -> float | None:
    s = s.drop_nulls()
    return float(s.median()) if len(s) else None


def _step_row(
    steps: pl.DataFrame, cats: pl.DataFrame, kernels: pl.DataFrame, base: SideInfo, new: SideInfo
) -> dict[str, Any]:
    b, n = _median(steps["base_ns"]), _median(steps["new_ns"])
    ratio = n / b if b and n is not None else None
    top = (
        cats.filter(pl.col("delta_ns") != 0)
        .sort(pl.col("delta_ns").abs(), descending=True)["category"]
        .to_list()[:2]
    )
    reasons = (
        [f"{_speed(ratio, new.label, 'step ')} (throughput {1e9 / b:.3g} → {1e9 / n:.3g} steps/s)"]
        if ratio
        else []
    )
    idle = [100 * s.idle_ns / s.window_ns for s in (base, new) if s.window_ns]
    if len(idle) == 2 and min(idle) > 50:
        reasons.append(
            f"the GPU is idle {idle[0]:.0f}% / {idle[1]:.0f}% of the window: step time is set by the host "
            "(CPU work, launches, waits), not by GPU kernels"
        )
    reasons += [r for r in (_category_reason(c, kernels, cats, base, new) for c in top) if r]
    return _row("time per step", "ns", b, n, "; ".join(reasons) or "no aligned steps")


def _kernel_row(
    steps: pl.DataFrame, cats: pl.DataFrame, kernels: pl.DataFrame, base: SideInfo, new: SideInfo
) -> dict[str, Any]:
    d = (pl.col("new_time_ns") - pl.col("base_time_ns")).abs()
    kc = cats.filter((pl.col("category") != "idle") & (d > 0)).sort(d, descending=True)
    reasons = [_category_reason(c, kernels, cats, base, new) for c in kc["category"].to_list()[:2]]
    return _row(
        "GPU kernel time per step",
        "ns",
        _median(steps["base_gpu_ns"]),
        _median(steps["new_gpu_ns"]),
        "; ".join(r for r in reasons if r) or "no GPU work in scope",
    )


def _idle_row(base: SideInfo, new: SideInfo, n: int) -> dict[str, Any]:
    k = max(n, 1)
    return _row(
        "GPU idle per step",
        "ns",
        base.idle_ns / k,
        new.idle_ns / k,
        f"busy {fmt_ns(base.busy_ns / k)} → {fmt_ns(new.busy_ns / k)} per step; idle share "
        f"{100 * base.idle_ns / max(base.window_ns, 1):.0f}% → {100 * new.idle_ns / max(new.window_ns, 1):.0f}%",
    )


def _copy_desc(r: dict[str, Any], p: str) -> str:
    if not r[f"{p}_count"]:
        return "none"
    big = (r[f"{p}_bytes"] or 0) / r[f"{p}_count"] >= 1 << 16
    bw = f" at {r[f'{p}_gbps']:.3g} GB/s" if r.get(f"{p}_gbps") and big else ""
    return f"{r[f'{p}_count']} x {fmt_ns(r[f'{p}_ns'] / r[f'{p}_count'])}{bw}"


def _copy_row(copies: pl.DataFrame, n: int) -> dict[str, Any]:
    if copies.height == 0:
        return _row(
            "host/device copies per step",
            "ns",
            None,
            None,
            "no memcpy in the aligned steps on either side",
            "n/a",
        )
    b, nw = float(copies["base_ns"].sum()), float(copies["new_ns"].sum())
    saved = b - nw
    lead = (
        f"copy time saved {fmt_ns(saved)}"
        if saved > 0
        else f"copy time added {fmt_ns(-saved)}"
        if saved
        else "same copy time"
    )
    parts = [
        f"{r['copy_kind']} {r['host_memory']}: {_copy_desc(r, 'base')} → {_copy_desc(r, 'new')}"
        for r in copies.head(2).iter_rows(named=True)
    ]
    return _row("host/device copies per step", "ns", b / max(n, 1), nw / max(n, 1), "; ".join([lead, *parts]))


def _memory_peak(mem: pl.DataFrame, side: str) -> tuple[float | None, str]:
    m = mem.filter(pl.col("side") == side)
    if m.height == 0:
        return None, "no allocator events"
    if m["peak_reserved_bytes"].drop_nulls().len():
        v = float(m["peak_reserved_bytes"].max())
        tot = m["device_memory_bytes"].drop_nulls()
        pct = (
            f" ({100 * v / float(tot.max()):.0f}% of {fmt_bytes(tot.max())})"
            if tot.len() and tot.max()
            else ""
        )
        return v, f"reserved {fmt_bytes(v)}{pct}"
    v = float(m["net_growth_bytes"].max())
    return v, f"allocations grew by {fmt_bytes(v)}"


def _memory_row(mem: pl.DataFrame, base: SideInfo, new: SideInfo) -> dict[str, Any]:
    (b, bd), (n, nd) = _memory_peak(mem, "base"), _memory_peak(mem, "new")
    if b is None and n is None:
        return _row(
            "peak GPU memory",
            "bytes",
            None,
            None,
            "no [memory] events on either side (profile with profile_memory=True)",
            "n/a",
        )
    return _row("peak GPU memory", "bytes", b, n, f"{base.label}: {bd}; {new.label}: {nd}")


def _cold_cost(c: dict[str, Any]) -> float | None:
    vals = [max(p, 0) for p in (c["excess_ns"], c["compile_ns"] or None) if p is not None]
    return float(max(vals)) if vals else None


def _cold_desc(c: dict[str, Any], label: str) -> str:
    bits = [
        f"first step {fmt_ns(c['first_step_ns'])} vs median {fmt_ns(c['median_other_ns'])}"
        if c["excess_ns"] is not None
        else f"{c['steps']} step(s): no first-vs-rest comparison"
    ]
    if c["compile_ns"]:
        bits.append(f"compile {fmt_ns(c['compile_ns'])} in {c['compile_spans']} spans")
    if c["module_load_ns"]:
        bits.append(f"module loading {fmt_ns(c['module_load_ns'])}")
    return f"{label}: " + ", ".join(bits)


def _cold_row(
    cold: pl.DataFrame, base: SideInfo, new: SideInfo, fnd: pl.DataFrame | None = None
) -> dict[str, Any]:
    """Each side's warm-up: WRM001's predicted saving when the rules ran (a first step a little slower than the
    rest is jitter, not warm-up: one threshold, the rule's), else the first step's excess and compile spans."""
    cb, cn = cold.row(0, named=True), cold.row(1, named=True)
    reason = f"{_cold_desc(cb, base.label)}; {_cold_desc(cn, new.label)}"
    if fnd is None:
        return _row("cold start", "ns", _cold_cost(cb), _cold_cost(cn), reason)
    w = fnd.filter(pl.col("rule") == "WRM001")
    b = float(w["base_impact_ns"].fill_null(0).sum()) if w.height else 0.0
    n = float(w["new_impact_ns"].fill_null(0).sum()) if w.height else 0.0
    if not b and not n:
        return _row(
            "cold start", "ns", 0.0, 0.0, f"no warm-up found on either side (WRM001); {reason}", "same"
        )
    return _row("cold start", "ns", b, n, f"WRM001's predicted saving; {reason}")


def _findings_row(fnd: pl.DataFrame) -> dict[str, Any]:
    by = {
        s: fnd.filter(pl.col("status") == s)["rule"].to_list()
        for s in ("resolved", "new", "persists", "not comparable")
    }
    verdict = (
        "worse"
        if by["new"] and not by["resolved"]
        else "better"
        if by["resolved"] and not by["new"]
        else "mixed"
        if by["new"]
        else "same"
    )
    return _row(
        "findings",
        "count",
        float(fnd.filter(pl.col("base_count") > 0).height),
        float(fnd.filter(pl.col("new_count") > 0).height),
        "; ".join(f"{k}: {', '.join(v)}" for k, v in by.items() if v),
        verdict,
    )


def _headline(parts: dict[str, Any], base: SideInfo, new: SideInfo, n: int) -> pl.DataFrame:
    """The table people ask for first: each metric with a verdict and its reason."""
    steps, cats, kernels = parts["steps"], parts["categories"], parts["kernels"]
    rows = [
        _step_row(steps, cats, kernels, base, new),
        *_throughput_rows(steps, base, new),
        _kernel_row(steps, cats, kernels, base, new),
        _idle_row(base, new, n),
        _copy_row(parts["copies"], n),
        _memory_row(parts["memory"], base, new),
        _cold_row(parts["cold_start"], base, new, parts["findings"] if parts.get("analysed") else None),
    ]
    if parts["findings"].height:
        rows.append(_findings_row(parts["findings"]))
    return pl.DataFrame(rows, schema=HEADLINE_SCHEMA, orient="row")


def _throughput_rows(steps: pl.DataFrame, base: SideInfo, new: SideInfo) -> list[dict[str, Any]]:
    """Work per second on each side (samples/s, tokens/s) from the work per step and the median step time."""
    b_t, n_t = _median(steps["base_ns"]), _median(steps["new_ns"])
    if not (b_t and n_t and base.per_step and new.per_step) or base.per_step_unit != new.per_step_unit:
        return []
    unit = base.per_step_unit
    b, n = base.per_step * 1e9 / b_t, new.per_step * 1e9 / n_t
    same = base.per_step_source == new.per_step_source or base.per_step == new.per_step
    how = (
        f"{base.per_step:g} {unit} per step ({base.per_step_source})"
        if same
        else f"{base.per_step:g} {unit} per step on {base.label} ({base.per_step_source}), "
        f"{new.per_step:g} on {new.label} ({new.per_step_source})"
    )
    ratio = n / b if b else None
    verdict = _verdict_word(ratio, lower_is_better=False)
    word = f"{ratio:.2f}x the throughput of {base.label}" if ratio else ""
    return [
        _row(
            f"throughput ({unit}/s)",
            f"{unit}/s",
            b,
            n,
            f"{new.label}: {n:,.0f} {unit}/s vs {b:,.0f} ({word}); {how}",
            verdict,
        )
    ]
