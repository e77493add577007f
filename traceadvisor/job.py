"""A distributed job: one trace per rank, analysed rank by rank in parallel, then across ranks.

``analyze_job(paths)`` runs ``scaleout.worker.analyze_rank`` on every rank file (local process pool, or a
dask.distributed cluster with ``dask=ADDRESS`` / ``"local"`` / ``$TRACEADVISOR_DASK``); workers return compact
results (trace summary, findings, per-step and per-collective tables), never event tables, and the cross-rank
rules (those with ``detect_tables``, e.g. STR001) and analyses (``scaleout.crossrank``) run on those tables.

``merge_job(traces)`` is the small-job alternative: the ranks' events concatenated into one trace, on which the
cross-rank rules run through their ``detect``.

Kineto timestamps are wall-clock based (Unix epoch or a shared ``baseTimeNanoseconds``), so ranks of one job line
up to within the hosts' clock offsets, which ``crossrank.clock_offsets`` estimates and removes.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from traceadvisor.engine.runner import AnalysisResult
from traceadvisor.errors import UsageError
from traceadvisor.trace import Trace, TraceMeta

ABSOLUTE_CLOCKS = {"unix_ns", "unix", "epoch"}
TRACE_SUFFIXES = (".json", ".json.gz", ".sqlite", ".rpd", ".db", ".nsys-rep")
DASK_ENV = "TRACEADVISOR_DASK"


def merge_job(traces: list[Trace]) -> Trace:
    """One trace holding the events of several ranks of one job (each trace must carry its rank)."""
    if len(traces) < 2:
        raise UsageError("--job needs the traces of at least two ranks", "Pass one trace file per rank")
    ranks = [t.meta.rank for t in traces]
    if any(r is None for r in ranks) or len(set(ranks)) != len(ranks):
        raise UsageError(
            f"--job needs one trace per distinct rank, got ranks {ranks}",
            "Pass the per-rank traces of a single distributed job",
        )
    frames = [
        t.events.with_columns(pl.col("rank").fill_null(pl.lit(t.meta.rank, dtype=pl.Int32))) for t in traces
    ]
    first = traces[0].meta
    devices = {(t.meta.rank, d.index): d for t in traces for d in t.meta.devices}
    caps = set.intersection(*(set(t.meta.capabilities) for t in traces))
    warnings = [f"rank {t.meta.rank}: {w}" for t in traces for w in t.meta.warnings]
    if (
        not all(t.meta.clock_base in ABSOLUTE_CLOCKS for t in traces)
        and len({t.meta.base_time_ns for t in traces}) > 1
    ):
        warnings.append(
            "the ranks' clocks may not be comparable (relative time bases differ); cross-rank timing "
            "comparisons are approximate"
        )
    meta = dataclasses.replace(
        first,
        path=f"job({', '.join(t.name for t in traces)})",
        rank=None,
        devices=list(devices.values()),
        capabilities=caps,
        warnings=warnings,
        skipped={},
        input_events=None,
        world_size=max((t.meta.world_size or 0) for t in traces) or len(traces),
    )
    return Trace(pl.concat(frames, how="vertical_relaxed"), meta)


# ---------------------------------------------------------------------------------------------- finding rank files


def _natural(p: str) -> tuple:
    return tuple(int(x) if x.isdigit() else x for x in re.split(r"(\d+)", p))


def _is_trace_file(p: Path) -> bool:
    n = p.name.lower()
    return p.is_file() and n.endswith(TRACE_SUFFIXES) and n != "job_truth.json"


def rank_files(specs: Iterable[str | Path]) -> list[str]:
    """The rank files of ``PATH...|DIR|GLOB``: files as given, a folder's trace files, a glob's matches."""
    out: list[str] = []
    for spec in specs:
        s = str(spec)
        p = Path(s)
        if p.is_dir():
            found = sorted((str(c) for c in p.iterdir() if _is_trace_file(c)), key=_natural)
            if not found:
                raise UsageError(
                    f"folder {s} holds no trace files",
                    "Pass the folder with one trace per rank, or the files",
                )
            out += found
        elif p.exists():
            out.append(s)
        elif glob.has_magic(s):
            found = sorted((m for m in glob.glob(s) if _is_trace_file(Path(m))), key=_natural)
            if not found:
                raise UsageError(
                    f"no trace file matches {s}", "Check the pattern (quote it so the shell keeps it)"
                )
            out += found
        else:
            raise UsageError(
                f"no such file or folder: {s}", "Pass the per-rank trace files, their folder or a glob"
            )
    seen: set[str] = set()
    uniq = [p for p in out if not (p in seen or seen.add(p))]
    if len(uniq) < 2:
        raise UsageError("--job needs the traces of at least two ranks", "Pass one trace file per rank")
    return uniq


# ---------------------------------------------------------------------------------------------------- the result


@dataclass
class JobView:
    """Stands for the whole job where the engine expects a trace (cross-rank findings)."""

    meta: TraceMeta
    span: int

    @property
    def name(self) -> str:
        return self.meta.path

    def span_ns(self) -> int:
        return self.span


@dataclass
class JobSummary:
    """Everything the reports show about a job, computed from the ranks' compact results."""

    name: str
    world_size: int | None
    ranks: list[dict[str, Any]]  # one row per rank: crossrank.per_rank plus path, name, span, findings
    rank_traces: list[dict[str, Any]]  # json_report.trace_summary of each rank, with its library "summary"
    matrix: pl.DataFrame  # crossrank.rank_step_matrix
    skew: dict[str, Any]
    skew_top: list[dict[str, Any]]
    bandwidth: list[dict[str, Any]]
    link: dict[str, Any] | None
    executor: str
    timing: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    rank_findings: list[dict[str, Any]] = field(default_factory=list)  # every rank's findings, compact
    t0_ns: int | None = None  # the job's earliest aligned start (crossrank.aligned_clock)
    offsets_ns: dict[int, int] = field(
        default_factory=dict
    )  # rank -> clock offset (rank clock - aligned clock)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "world_size": self.world_size,
            "ranks": self.ranks,
            "rank_step": self.matrix.to_dicts() if self.matrix.height else [],
            "skew": self.skew,
            "skew_top": self.skew_top,
            "bandwidth": self.bandwidth,
            "link": self.link,
            "executor": self.executor,
            "timing": self.timing,
            "warnings": self.warnings,
            "rank_findings": self.rank_findings,
            "t0_ns": self.t0_ns,
        }


@dataclass
class JobResult(AnalysisResult):
    job: JobSummary | None = None


def _dedupe_skipped(results) -> list[dict[str, Any]]:
    seen: dict[tuple[str, str], dict[str, Any]] = {}
    for r in results:
        for s in r.skipped:
            k = (s["rule"], s["reason"])
            if k not in seen:
                seen[k] = {**s, "trace": r.name, "ranks": 0}
            seen[k]["ranks"] += 1
    out = []
    for s in seen.values():
        if s["ranks"] > 1:
            s["trace"] = f"{s['ranks']} ranks"
        out.append(s)
    return out


def _link(results, world_size: int | None):
    from traceadvisor.devices import MODELS, collective_link

    models = [m for r in results for m in r.models]
    if not models:
        return None
    key = max(set(models), key=models.count)
    model = next((m for m in MODELS if m.key == key), None)
    return collective_link(model, world_size)


def _clean(v: Any) -> Any:
    if isinstance(v, float):
        return None if v != v else round(v, 6)
    return v


def _rows(df: pl.DataFrame) -> list[dict[str, Any]]:
    return [{k: _clean(v) for k, v in row.items()} for row in df.to_dicts()] if df.height else []


def analyze_job(
    specs: Iterable[str | Path],
    *,
    select: Iterable[str] = (),
    ignore: Iterable[str] = (),
    packs: Iterable[str] = (),
    cli_options: Iterable[str] = (),
    config: Path | None = None,
    cache: bool = True,
    device: str | None = None,
    dask: str | None = None,
    workers: int | None = None,
    progress=None,
) -> JobResult:
    """Analyse every rank of a job in its own worker, then across ranks (see the module doc)."""
    from traceadvisor.engine.config import find_config, load_config, parse_cli_options, resolve_options
    from traceadvisor.engine.loader import load_rules, select_rules
    from traceadvisor.engine.runner import build_findings
    from traceadvisor.scaleout import crossrank
    from traceadvisor.scaleout.executor import run_ranks
    from traceadvisor.scaleout.worker import RankSettings

    t_start = time.perf_counter()
    paths = [str(Path(p).resolve()) for p in rank_files(specs)]
    cfg_path = config or find_config()
    cfg = load_config(cfg_path)
    packs = [*cfg.get("rules", []), *packs]
    rules = select_rules(
        load_rules(packs), list(select) or list(cfg.get("select", [])), [*cfg.get("ignore", []), *ignore]
    )
    cross = [rm for rm in rules if callable(getattr(rm.module, "detect_tables", None))]
    settings = RankSettings(
        select=tuple(select),
        ignore=tuple(ignore),
        packs=tuple(str(Path(p).resolve()) for p in packs),
        cli_options=tuple(cli_options),
        config=str(Path(cfg_path).resolve()) if cfg_path else None,
        cache=cache,
        device=device,
        cross_rank=tuple(rm.code for rm in cross),
    )
    dask = dask if dask is not None else (os.environ.get(DASK_ENV) or None)
    if progress is not None:
        progress.start(len(paths), "analyzing ranks", unit="ranks")
    fold = FindingFold()
    results = run_ranks(
        paths,
        settings,
        dask=dask,
        workers=workers,
        on_done=(lambda: progress.advance(1)) if progress else None,
        on_result=fold.take,
    )
    t_ranks = time.perf_counter()
    failed = [r for r in results if r.failed]
    results = [r for r in results if not r.failed]
    if len(results) < 2:
        why = f" ({Path(failed[0].path).name}: {failed[0].failed})" if failed else ""
        raise UsageError(
            f"--job needs at least two readable rank traces, {len(results)} could be analysed{why}",
            "Pass the per-rank traces of one job",
        )
    _check_ranks(results)

    world = max((r.world_size or 0) for r in results) or len(results)
    tables = crossrank.JobTables.concat([r.collectives for r in results], [r.steps for r in results], world)
    vendors = [r.vendor for r in results]
    vendor = max(set(vendors), key=vendors.count)
    span = max((int(r.trace.get("span_ns") or 0) for r in results), default=0)
    name = f"job of {len(results)} ranks"
    view = JobView(TraceMeta(path=name, format="job", vendor=vendor, world_size=world), span)

    res = JobResult(traces=[], rules=list(rules))
    res.findings.extend(fold.folded(len(results)))
    for r in results:
        res.errors.extend(r.errors)
    res.skipped = _dedupe_skipped(results)
    file_opts = {k.upper(): v for k, v in (cfg.get("options") or {}).items()}
    cli_opts = parse_cli_options(list(cli_options))
    straggler_rows = None
    for rm in cross:
        opts = resolve_options(rm, file_opts, cli_opts)
        try:
            rows = rm.module.detect_tables(tables, opts)
            if rm.code == "STR001":
                straggler_rows = rows
            res.findings.extend(build_findings(rm, view, rows, opts))
        except Exception as e:  # noqa: BLE001 - a failing rule never sinks the run
            res.errors.append(
                {"rule": rm.code, "name": rm.rule.name, "trace": name, "error": f"{type(e).__name__}: {e}"}
            )
    res.findings.sort(
        key=lambda f: (
            f.minor,
            -f.impact_ns,
            -(f.bound_ns or 0),
            f.rule,
            f.rank if f.rank is not None else -1,
            f.trace,
        )
    )

    link = _link(results, max((r.collectives["group_size"].max() or 0) for r in results) or world)
    per = crossrank.per_rank(tables, straggler_rows)
    by_rank = {r.rank: r for r in results}
    n_find: dict[int | None, int] = {}
    for f in res.findings:
        n_find[f.rank] = n_find.get(f.rank, 0) + 1
    ranks = []
    for row in _rows(per):
        r = by_rank.get(row["rank"])
        ranks.append(
            {
                **row,
                "name": r.name if r else None,
                "path": r.path if r else None,
                "span_ms": (r.trace.get("span_ns") or 0) / 1e6 if r else None,
                **_library_totals(r.summary if r else {}),
                "findings": n_find.get(row["rank"], 0),
            }
        )
    offsets = tables.offsets()
    warnings = [f"{Path(r.path).name} was left out: {r.failed}" for r in failed]
    big = offsets.filter(pl.col("offset_ns").abs() > 1_000_000)
    if big.height:
        warnings.append(
            f"the ranks' clocks differ by up to {offsets['offset_ns'].abs().max() / 1e6:.1f} ms; arrival times were "
            "aligned on the collectives' end times"
        )
    if tables.collectives.height == 0:
        warnings.append("no collective kernels in any rank: the cross-rank analyses have nothing to match")
    job = JobSummary(
        name=name,
        world_size=world,
        ranks=ranks,
        rank_traces=[{**r.trace, "summary": r.summary} for r in results],
        matrix=crossrank.rank_step_matrix(tables),
        skew=crossrank.skew_summary(tables),
        skew_top=_rows(crossrank.skew_table(tables)),
        bandwidth=_rows(crossrank.bandwidth_table(tables, link)),
        link=dataclasses.asdict(link) if link else None,
        executor=f"dask {dask}" if dask else "local process pool",
        warnings=warnings,
        timing={
            "wall_s": round(time.perf_counter() - t_start, 3),
            "ranks_s": round(t_ranks - t_start, 3),
            "rank_seconds": [round(r.seconds, 3) for r in results],
            "worker_peak_rss_bytes": {str(pid): rss for pid, rss in _worker_rss(results).items()},
        },
    )
    job.rank_findings = fold.compact_rows()
    job.t0_ns, job.offsets_ns = crossrank.aligned_clock(tables)
    res.job = job
    return res


def _library_totals(s: dict[str, Any]) -> dict[str, Any]:
    """A rank's window, busy, idle and analysed steps as the library summary (``traceadvisor.summary``) has them."""

    def ms(k: str) -> float | None:
        v = s.get(k)
        return None if v is None else round(v / 1e6, 6)

    return {
        "window_ms": ms("window_ns"),
        "busy_ms": ms("busy_ns"),
        "idle_ms": ms("idle_ns"),
        "analysed_steps": s.get("analysed_steps"),
        "median_step_ms": ms("median_step_ns"),
    }


COMPACT = ("rule", "name", "trace", "rank", "device", "count", "impact_ns", "share", "summary")


class FindingFold:
    """Findings folded over ranks as they arrive: per rule the worst finding is kept whole, every finding as
    its compact row (``COMPACT``), so the job's parent holds one whole finding per rule whatever the rank count.
    The result does not depend on the order in which ranks arrive."""

    def __init__(self) -> None:
        self.worst: dict[str, tuple[tuple, Any]] = {}  # rule -> (worst key, finding)
        self.rows: list[tuple[tuple, dict[str, Any]]] = []  # (position, compact row)

    def add(self, f, at: tuple) -> None:
        row = {k: getattr(f, k) for k in COMPACT}
        self.rows.append((at, row))
        key = _worst_key(row)
        if f.rule not in self.worst or key < self.worst[f.rule][0]:
            self.worst[f.rule] = (key, f)

    def take(self, r):
        """Fold the findings of rank result ``r`` in and return ``r`` without them."""
        for i, f in enumerate(r.findings):
            self.add(f, (r.rank if r.rank is not None else 1 << 30, r.path, i))
        r.findings = []
        return r

    def compact_rows(self) -> list[dict[str, Any]]:
        """Every rank's findings, compact, in rank order (a rank's own findings in their order)."""
        return [row for _, row in sorted(self.rows, key=lambda x: x[0])]

    def folded(self, n_ranks: int) -> list:
        """One finding per rule over the ranks: the worst rank's finding, saying on how many ranks it fired.

        Ranks run in parallel, so the job loses about the worst rank's impact, not the sum; ``by_rank`` in the
        evidence lists every rank's impact."""
        groups: dict[str, list[dict[str, Any]]] = {}
        for row in self.compact_rows():
            groups.setdefault(row["rule"], []).append(row)
        out = []
        for rule, fs in groups.items():
            worst = self.worst[rule][1]
            if len(fs) == 1:
                out.append(worst)
                continue
            ranks = sorted({f["rank"] for f in fs if f["rank"] is not None})
            by_rank: dict[int | None, dict[str, Any]] = {}
            for f in sorted(fs, key=_worst_key):
                e = by_rank.setdefault(
                    f["rank"], {"rank": f["rank"], "impact_ms": 0.0, "count": 0, "share_pct": 0.0}
                )
                e["impact_ms"] = round(e["impact_ms"] + f["impact_ns"] / 1e6, 6)
                e["count"] += f["count"]
                e["share_pct"] = round(max(e["share_pct"], 100 * f["share"]), 4)
            ev = dict(worst.evidence or {})
            ev["ranks_with_finding"] = len(ranks)
            ev["by_rank"] = sorted(by_rank.values(), key=lambda e: (-e["impact_ms"], e["rank"] or 0))[:64]
            out.append(
                dataclasses.replace(
                    worst,
                    summary=f"on {len(ranks)} of {n_ranks} ranks (worst: rank {worst.rank}): {worst.summary}",
                    evidence=ev,
                )
            )
        return out


def _worst_key(row: dict[str, Any]) -> tuple:
    return (-row["impact_ns"], row["rank"] if row["rank"] is not None else -1, row["device"] or 0)


def _worker_rss(results) -> dict[int, int]:
    out: dict[int, int] = {}
    for r in results:
        out[r.worker_pid] = max(out.get(r.worker_pid, 0), r.peak_rss_bytes)
    return out


def _check_ranks(results) -> None:
    from collections import Counter

    ranks = [r.rank for r in results]
    missing = [r.path for r in results if r.rank is None]
    if missing:
        raise UsageError(
            f"{Path(missing[0]).name} does not record its rank (no distributedInfo) and its name has no rankN",
            "Name the files rank0..., rank1... or profile with torch.distributed initialised",
        )
    dup = sorted(r for r, n in Counter(ranks).items() if n > 1)
    if dup:
        paths = [Path(r.path).name for r in results if r.rank == dup[0]]
        raise UsageError(
            f"rank {dup[0]} appears in several files ({', '.join(paths[:3])})",
            "Pass the per-rank traces of a single distributed job, one file per rank",
        )
