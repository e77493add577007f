"""Critical path per step and the idle breakdown, from the replayed graph (docs/impact.md).

The critical path is walked back from the latest end of the analysed window along the edges that set each
point's time in the (unprofiled) baseline replay. Every stretch of it is one of:

* host: ``python_launch`` (the host's own work and launch calls), ``sync_wait`` (a host call waiting for the
  GPU), ``copy_wait`` (a copy call waiting for its copy), ``data_loading`` (host time inside a DataLoader
  batch fetch);
* GPU: ``gpu_compute``, ``gpu_copy`` (copies, memsets), ``gpu_comm`` (collectives), ``gpu_queue`` (waiting for
  earlier work on another queue);
* ``launch_latency``: between a launch call and the start of its GPU work.

Per step (the analysed steps; the whole window without steps) the stretches add up to the replayed step.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from traceadvisor import query
from traceadvisor.replay import graph as G
from traceadvisor.replay.sim import walk_back
from traceadvisor.schema import views

HOST_CATS = ("python_launch", "sync_wait", "copy_wait", "data_loading")
GPU_CATS = ("gpu_compute", "gpu_copy", "gpu_comm", "gpu_queue")
CATEGORIES = (*HOST_CATS, *GPU_CATS, "launch_latency")
FETCH = r"^enumerate\(DataLoader\)#|_dataloader_next$"


def _fetch_edges(rp) -> np.ndarray:
    """Per edge: host chain edges that lie mostly inside a DataLoader batch fetch of their thread."""
    g = rp.g
    out = np.zeros(len(g.src), bool)
    lf = rp.trace.lazy()
    # the pattern is matched once per distinct name of the trace (views.name_contains), not once per event
    fetch = views.name_contains(lf, FETCH)
    sp = (
        lf.filter(pl.col("kind").is_in(("cpu_op", "annotation", "python")) & fetch)
        .select(
            pl.col("rank").fill_null(-1).cast(pl.Int64),
            pl.col("pid").fill_null(-1).cast(pl.Int64),
            pl.col("tid").fill_null(-1).cast(pl.Int64),
            "start_ns",
            (pl.col("start_ns") + pl.col("dur_ns")).alias("end_ns"),
        )
        .join(g.threads.lazy(), on=["rank", "pid", "tid"], how="inner")
        .select("tcode", "start_ns", "end_ns")
        .collect(engine=query.engine())
    )
    if not sp.height:
        return out
    ch = np.nonzero(g.etype == G.E_CHAIN)[0]
    rec = g.recorded_points()
    a, b = rec[g.src[ch]], rec[g.dst[ch]]
    cov = G._covered(sp, g.thread[g.src[ch] // 2], a, b)
    out[ch] = (b > a) & (cov * 2 > (b - a))
    return out


def critical_path(rp) -> dict[str, Any]:
    """Per analysed step: the critical path's time per category (ns); totals over the window; top stretches."""
    g = rp.g
    t, via = rp.times, rp.via
    j = np.nonzero(rp.mask)[0]
    if not len(j):
        return {}
    fetch = _fetch_edges(rp)
    is_copy_api = np.zeros(g.n, bool)
    is_copy_api[: g.nh] = _host_names_match(g, "(?i)memcpy")
    p = int(2 * j[np.argmax(t[2 * j + 1])] + 1)
    w0 = int(t[2 * j].min())
    edges = walk_back(p, w0, t, via, g.src)
    pts = np.concatenate([[p], g.src[edges[:-1]]]).astype(np.int64) if len(edges) else np.zeros(0, np.int64)
    dur = t[pts] - np.maximum(t[g.src[edges]], w0)
    end = t[pts]
    nodes = pts // 2
    code = _categories(g, edges, fetch, is_copy_api)
    steps = _step_bounds(rp)
    out_steps = []
    per_step = _per_step(steps, end, code, dur)
    for k, (s, e) in enumerate(steps):
        out_steps.append(
            {
                "step": k,
                "start_ns": s,
                "end_ns": e,
                **{c: int(per_step[k, i]) for i, c in enumerate(CATEGORIES)},
            }
        )
    sums = _sum_by(code, dur, len(CATEGORIES))
    total = {c: int(sums[i]) for i, c in enumerate(CATEGORIES)}
    length = int(dur.sum())
    return {
        "window_ns": rp.window_ns,
        "path_ns": length,
        "categories": total,
        "shares": {c: round(v / length, 4) if length else 0.0 for c, v in total.items()},
        "host_ns": sum(total[c] for c in HOST_CATS),
        "gpu_ns": sum(total[c] for c in GPU_CATS),
        "steps": out_steps,
        "top": _top(g, nodes, code, dur),
    }


def _host_names_match(g, pattern: str) -> np.ndarray:
    """Per host node: its name matches ``pattern`` (matched once per distinct name when the graph keeps its
    host names as codes into a table)."""
    if g.host_name_table is not None:
        tab = pl.Series(g.host_name_table.tolist(), dtype=pl.String, strict=False)
        return tab.str.contains(pattern).fill_null(False).to_numpy()[g.host_name_code]
    names = pl.Series(g.names[: g.nh].tolist(), dtype=pl.String, strict=False)
    return names.str.contains(pattern).fill_null(False).to_numpy()


def _categories(g, e: np.ndarray, fetch: np.ndarray, is_copy_api: np.ndarray) -> np.ndarray:
    """Per critical-path edge: its index in ``CATEGORIES``."""
    et = g.etype[e]
    dn = g.dst[e] // 2
    own = et == G.E_OWN
    waits = (et == G.E_WAIT) | ((et == G.E_CHAIN) & (g.dst[e] % 2 == 1) & g.wait_node[dn])
    coll = own & (g.category[dn] == "collective")
    copy = own & np.isin(g.kind[dn], ["memcpy", "memset"])
    conds = [
        coll,
        copy,
        own,
        et == G.E_STREAM,
        et == G.E_LAUNCH,
        waits & is_copy_api[dn],
        waits,
        fetch[e],
    ]
    names = ["gpu_comm", "gpu_copy", "gpu_compute", "gpu_queue", "launch_latency", "copy_wait", "sync_wait"]
    choices = [CATEGORIES.index(c) for c in [*names, "data_loading"]]
    return np.select(conds, choices, default=CATEGORIES.index("python_launch")).astype(np.int64)


def _per_step(steps: list[tuple[int, int]], end: np.ndarray, code: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """(step, category) -> critical-path time of the stretches that end inside the step (start, end]."""
    nc = len(CATEGORIES)
    if not steps or not len(end):
        return np.zeros((len(steps), nc), np.int64)
    s = np.array([x[0] for x in steps], np.int64)
    e = np.array([x[1] for x in steps], np.int64)
    o = np.argsort(s, kind="stable")
    k = np.searchsorted(s[o], end, side="left") - 1
    ok = k >= 0
    k = o[np.maximum(k, 0)]
    ok &= (end > s[k]) & (end <= e[k])
    return _sum_by(k[ok] * nc + code[ok], dur[ok], len(steps) * nc).reshape(len(steps), nc)


def _step_bounds(rp) -> list[tuple[int, int]]:
    from traceadvisor.replay import segments

    g = rp.g
    segs = segments(rp)
    if not segs:
        return []
    # replayed step bounds: a step ends where the next analysed step starts (the last at the window end)
    m = np.nonzero(rp.mask & (g.ntype == G.MARKER))[0]
    j = np.nonzero(rp.mask)[0]
    end = int(rp.times[2 * j + 1].max())
    if not len(m):
        return [(int(rp.times[2 * j].min()), end)]
    m = m[np.argsort(rp.times[2 * m])]
    starts = [int(rp.times[2 * x]) for x in m]
    return [(s, starts[i + 1] if i + 1 < len(starts) else end) for i, s in enumerate(starts)]


def _sum_by(idx: np.ndarray, w: np.ndarray, n: int) -> np.ndarray:
    """Integer sums of ``w`` per index ``idx`` in [0, n): exact (float64 sums of integers below 2**53)."""
    if not len(w) or int(np.abs(w).sum()) < 2**53:
        return np.bincount(idx, weights=w, minlength=n).astype(np.int64)
    out = np.zeros(n, np.int64)
    np.add.at(out, idx, w)
    return out


def _top(g, nodes: np.ndarray, cat: np.ndarray, dur: np.ndarray, n: int = 10) -> list[dict[str, Any]]:
    """The critical path's largest contributors by (category, event name); ``cat``: indices into
    ``CATEGORIES``."""
    if not len(nodes):
        return []
    # summed per (category, name code) first, the names looked up for those few groups only
    code = g.name_code[nodes] if g.name_code is not None else np.unique(nodes, return_inverse=True)[1]
    first = np.zeros(int(code.max()) + 1, np.int64)
    first[code[::-1]] = nodes[::-1]  # a node of each code: the names are the node's
    key, inv = np.unique(cat.astype(np.int64) * len(first) + code, return_inverse=True)
    ns = _sum_by(inv, dur, len(key))
    cnt = np.bincount(inv, minlength=len(key)).astype(np.uint32)
    df = pl.DataFrame(
        {
            "category": pl.Series(np.array(CATEGORIES)[key // len(first)].tolist(), dtype=pl.String),
            "name": pl.Series([str(x) for x in g.names[first[key % len(first)]]], dtype=pl.String),
            "ns": ns,
            "count": cnt,
        }
    )
    top = df.group_by("category", "name").agg(pl.col("ns").sum(), pl.col("count").sum())
    # ties by category and name: the same contributors in the same order on every run (group_by has no order)
    return top.sort(["ns", "category", "name"], descending=[True, False, False]).head(n).to_dicts()


def idle_breakdown(rp) -> dict[str, Any]:
    """The analysed window split by what is on the critical path: host categories (GPU idle unless overlapped)
    and GPU categories, as shares of the window."""
    cp = critical_path(rp)
    if not cp:
        return {}
    w = max(cp["path_ns"], 1)
    return {
        "host": {c: round(cp["categories"][c] / w, 4) for c in HOST_CATS},
        "gpu": {c: round(cp["categories"][c] / w, 4) for c in GPU_CATS},
        "launch_latency": round(cp["categories"]["launch_latency"] / w, 4),
    }


LABELS = {
    "python_launch": "Python/launch",
    "sync_wait": "sync wait",
    "copy_wait": "copy wait",
    "data_loading": "data loading",
    "gpu_compute": "compute",
    "gpu_copy": "copy",
    "gpu_comm": "comm",
    "gpu_queue": "queue wait",
    "launch_latency": "launch latency",
}


def line(cp: dict[str, Any], pred: dict[str, Any] | None = None) -> str:
    """The critical path in one line of plain text, plus the every-fix-together prediction."""
    if not cp or not cp.get("path_ns"):
        return ""
    sh = cp["shares"]

    def part(cats) -> str:
        xs = sorted(((sh[c], c) for c in cats if sh[c] >= 0.01), reverse=True)
        return ", ".join(f"{LABELS[c]} {100 * v:.0f}%" for v, c in xs)

    host = sum(sh[c] for c in HOST_CATS)
    gpu = sum(sh[c] for c in GPU_CATS)
    out = f"critical path: host {100 * host:.0f}% ({part(HOST_CATS) or '-'}), GPU {100 * gpu:.0f}% ({part(GPU_CATS) or '-'})"
    if pred and pred.get("before_ns"):
        out += (
            f"; every fix together: {pred['before_ns'] / 1e6:.1f} ms down to {pred['after_ns'] / 1e6:.1f} ms"
        )
    return out
