"""Plan every selected rule on every trace lazily, collect them together, and build findings."""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from traceadvisor import query
from traceadvisor.engine.rule import CONFIDENCES, Finding, RuleModule
from traceadvisor.schema.views import collect_plans
from traceadvisor.summary import Summary, SummaryPlan
from traceadvisor.summary import plan as summary_plan
from traceadvisor.trace import Trace

REQUIRED_COLUMNS = ("rank", "device", "start_ns", "end_ns", "impact_ns")
MAX_EVIDENCE_ROWS = 20
MAX_RANGES = 200


@dataclass
class AnalysisResult:
    traces: list[Trace]
    findings: list[Finding] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)  # {rule, name, trace, reason}
    errors: list[dict[str, Any]] = field(default_factory=list)  # {rule, trace, error}
    rules: list[RuleModule] = field(default_factory=list)
    predictions: dict[str, dict[str, Any]] = field(default_factory=dict)  # trace -> prediction_all
    critical_paths: dict[str, dict[str, Any]] = field(default_factory=dict)  # trace -> replay.breakdown
    summaries: list[Summary] = field(default_factory=list)  # one per trace, same order as ``traces``

    def summary(self, index: int) -> Summary:
        """The library summary of ``traces[index]`` (collected with the rules; computed here for a result that
        was assembled by hand)."""
        if len(self.summaries) < len(self.traces):
            from traceadvisor.summary import summarize

            self.summaries = [
                self.summaries[i] if i < len(self.summaries) else summarize(t)
                for i, t in enumerate(self.traces)
            ]
        return self.summaries[index]

    def findings_of(self, index: int) -> list[Finding]:
        """Findings of ``traces[index]`` (by index: two traces may share a name)."""
        return [f for f in self.findings if f.trace_index == index]

    def to_dict(self) -> dict[str, Any]:
        from traceadvisor.report.json_report import result_to_dict

        return result_to_dict(self)


def _vendor_advice(rm: RuleModule, vendor: str) -> dict[str, str]:
    adv = dict(rm.rule.advice)
    stack = vendor if vendor in ("nvidia", "amd") else "nvidia"
    other = "amd" if stack == "nvidia" else "nvidia"
    out = {
        "stack": stack,
        "common": adv.get("common", ""),
        "torch": adv.get("torch", ""),
        "primary": adv.get(stack, ""),
        "other_stack": other,
        "other": adv.get(other, ""),
    }
    return {k: v for k, v in out.items() if v}


def skip_reason(rm: RuleModule, trace: Trace) -> str | None:
    for need in rm.rule.needs:
        alts = need if isinstance(need, tuple) else (need,)
        if not any(a in trace.meta.capabilities for a in alts):
            from traceadvisor.trace import CAPABILITIES

            what = " or ".join(CAPABILITIES.get(a, a) for a in alts)
            why = (
                "aggregate statistics only"
                if "aggregates_only" in trace.meta.capabilities
                else trace.meta.format
            )
            return f"needs {what}, which this input ({why}) does not provide"
    req = getattr(rm.module, "requires", None)
    if callable(req):
        return req(trace)
    return None


def _json_safe(v: Any) -> Any:
    if isinstance(v, float):
        return None if v != v else round(v, 6)
    if isinstance(v, dict):
        return {k: _json_safe(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_json_safe(x) for x in v]
    return v


MINOR_SHARE = 0.005  # findings predicted to save less than this share of the window (or MINOR_NS) are minor
MINOR_NS = 50_000


def _replayer(trace: Trace):
    """The trace's replay model, or None for inputs without a timeline."""
    if "timeline" not in trace.meta.capabilities:
        return None
    from traceadvisor.replay import replayer

    return replayer(trace)


def _predict(rm: RuleModule, trace: Trace, g: pl.DataFrame, options: dict[str, Any], fixes: list):
    """(Prediction | None, method note) for one finding's rows; the Fix is appended to ``fixes``."""
    fixfn = getattr(rm.module, "fix", None)
    if not callable(fixfn):
        return None, None
    rp = _replayer(trace)
    if rp is None:
        return None, "not modelled: the input has no timeline to replay"
    fx = fixfn(g, trace, options)
    if fx is None:
        return None, "not modelled: this finding's fix cannot be expressed on this trace"
    fixes.append(fx)
    return rp.predict(fx), None


def is_minor(impact_ns: int, window_ns: int) -> bool:
    return impact_ns < max(MINOR_SHARE * window_ns, MINOR_NS)


def _rank_count(trace: Trace) -> int:
    return int(trace.events.get_column("rank").drop_nulls().n_unique()) if trace.events.height else 0


def _in_total_order(rows: pl.DataFrame) -> pl.DataFrame:
    """The rule's rows in one order whatever order the query engine produced them in (same input, same
    evidence, byte for byte): by time, then by every other scalar column."""
    first = [c for c in ("start_ns", "end_ns") if c in rows.columns]
    rest = [
        c
        for c, t in rows.schema.items()
        if c not in first and (t.is_numeric() or t in (pl.String, pl.Boolean))
    ]
    return rows.sort([*first, *rest], nulls_last=True, maintain_order=True)


def _none_last(v: int | None) -> tuple[bool, int]:
    return (v is None, v if v is not None else 0)


def _finding_order(f: Finding) -> tuple:
    none_last = _none_last
    return (
        f.minor,
        -f.impact_ns,
        -(f.bound_ns or 0) if not f.impact_ns else 0,  # unmodelled findings: by the rule's own bound
        f.rule,
        f.trace,
        f.trace_index,
        none_last(f.rank),
        none_last(f.device),
        f.summary,
    )


def build_findings(
    rm: RuleModule,
    trace: Trace,
    rows: pl.DataFrame,
    options: dict[str, Any],
    fixes: dict[int, Any] | None = None,
    index: int = 0,
    context: pl.DataFrame | None = None,
) -> list[Finding]:
    """Findings of one rule on one trace from its collected rows; ``context`` is the rule's collected
    ``evidence_plan`` frame (collected with every other plan), handed to its ``evidence`` hook."""
    if rows.height == 0:
        return []
    missing = [c for c in REQUIRED_COLUMNS if c not in rows.columns]
    if missing:
        raise ValueError(f"detect() result lacks columns {missing}")
    rp = _replayer(trace) if callable(getattr(rm.module, "fix", None)) else None
    capture_ns = trace.span_ns()  # one query per rule, not three per finding
    # predicted savings are shares of the analysed window; a rule's own bound stays a share of the capture
    span = max(rp.window_ns if rp is not None and rp.window_ns > 0 else capture_ns, 1)
    keys = [k for k in rm.rule.group_by if k in rows.columns]
    rows = _in_total_order(rows)
    groups = rows.partition_by(keys, as_dict=True, maintain_order=True) if keys else {(): rows}
    out = []
    for key, g in groups.items():
        key = key if isinstance(key, tuple) else (key,)
        kv = dict(zip(keys, key, strict=False))
        bound = int(min(g["impact_ns"].fill_null(0).sum(), max(capture_ns, 1)))
        if bound < rm.rule.min_impact_ns:
            continue
        got: list = []
        pred, note = _predict(rm, trace, g, options, got)
        no_fix = getattr(rm.module, "NO_FIX", None)  # a rule whose fix the replay cannot express says why
        modelled = callable(getattr(rm.module, "fix", None)) or isinstance(no_fix, str)
        if pred is None and isinstance(no_fix, str):
            note = f"not modelled: {no_fix}"
        window = span
        if pred is not None and pred.scope == "capture":  # measured on every step, warm-up included
            window = max(pred.before_ns, 1)
        # a rule with a fix reports the replayed saving (0 where the fix cannot be expressed on this trace);
        # its own bound goes to bound_ns, never to impact_ns
        impact = pred.impact_ns if pred is not None else (0 if modelled else bound)
        count = int(g["count"].sum()) if "count" in g.columns else g.height
        conf = rm.rule.confidence
        if "confidence" in g.columns:
            vals = [c for c in g["confidence"].drop_nulls().to_list() if c in CONFIDENCES]
            if vals:
                conf = max(vals, key=CONFIDENCES.index)
        top = g.sort("impact_ns", descending=True, nulls_last=True, maintain_order=True)
        # a column named "_..." is the rule's own (read by its hooks), not evidence
        ev_cols = [c for c in top.columns if c != "confidence" and not c.startswith("_")]
        evidence: dict[str, Any] = {
            "items": top.head(MAX_EVIDENCE_ROWS).select(ev_cols).to_dicts(),
            "items_total": g.height,
        }
        extra = getattr(rm.module, "evidence", None)
        if callable(extra):
            more = extra(g, trace, options, context) if context is not None else extra(g, trace, options)
            evidence.update(more or {})
        uncertain = False
        if pred is not None and got and rp is not None:
            from traceadvisor.replay import overhead_sensitivity

            sens = overhead_sensitivity(rp, got[0], pred, MINOR_SHARE)
            if sens is not None:
                uncertain = sens.pop("uncertain")
                # the saving vanishes at a plausible higher profiler cost per recorded event, or it is only a
                # graph's closer kernels on a GPU-bound program (the note says which)
                if uncertain:
                    evidence["profiler_overhead"] = sens
        evidence = _json_safe(evidence)
        # the summary states what the rule measured (its bound); the predicted saving is impact_ns / share
        cap = max(capture_ns, 1)
        fmt = {
            "count": count,
            "impact_ms": bound / 1e6,
            "share_pct": 100.0 * bound / cap,
            "saving_ms": impact / 1e6,
            "saving_pct": 100.0 * impact / window,
            **kv,
        }
        fmt.update({k: v for k, v in evidence.items() if isinstance(v, (int, float, str))})
        try:
            summary = rm.rule.summary.format(**fmt)
        except (KeyError, ValueError, IndexError):
            summary = f"{rm.rule.title}: {count} occurrences, {impact / 1e6:.2f} ms"
        ranges = top.head(MAX_RANGES).select("start_ns", "end_ns").drop_nulls().sort("start_ns").rows()
        finding = Finding(
            rule=rm.code,
            name=rm.rule.name,
            title=rm.rule.title,
            summary=summary,
            trace=trace.name,
            trace_index=index,
            rank=kv.get("rank", trace.meta.rank),
            device=kv.get("device"),
            count=count,
            impact_ns=impact,
            share=round(impact / window, 6),
            confidence=conf,
            evidence=evidence,
            advice=_vendor_advice(rm, trace.meta.vendor),
            ranges=[(int(a), int(b)) for a, b in ranges],
            window_ns=window,
            prediction=pred.to_dict() if pred is not None else ({"method": note} if note else None),
            minor=pred is not None and (uncertain or is_minor(impact, window)),
            bound_ns=bound if modelled else None,
        )
        if fixes is not None and got:
            fixes[id(finding)] = got[0]
        out.append(finding)
    return out


def analyze(
    traces: list[Trace], rules: list[RuleModule], options: dict[str, dict[str, Any]] | None = None
) -> AnalysisResult:
    """Run ``rules`` over ``traces``. ``options`` maps a rule code to its resolved options. A trace built by hand
    is normalized first (a no-op for imported ones), so rules can rely on ``api_class`` and ``kind = "step"``."""
    from traceadvisor.normalize import normalize

    options = options or {}
    traces = [normalize(t) for t in traces]
    res = AnalysisResult(traces=list(traces), rules=list(rules))
    plans: list[tuple[RuleModule, int, pl.LazyFrame, pl.LazyFrame | None]] = []
    for i, trace in enumerate(traces):
        ranks = None
        for rm in rules:
            if callable(getattr(rm.module, "detect_tables", None)):  # a cross-rank rule (STR001)
                ranks = _rank_count(trace) if ranks is None else ranks
                if ranks < 2:  # not a job: the rule does not apply, and saying so on every trace is noise
                    continue
            reason = skip_reason(rm, trace)
            if reason:
                res.skipped.append(
                    {
                        "rule": rm.code,
                        "name": rm.rule.name,
                        "trace": trace.name,
                        "trace_index": i,
                        "reason": reason,
                    }
                )
                continue
            opts = rm.rule.options_for(options.get(rm.code))
            try:
                applies = getattr(rm.module, "applies", None)
                if callable(applies) and not applies(trace):  # nothing to find: no plan to build or collect
                    continue
                ctx = getattr(rm.module, "evidence_plan", None)
                plans.append(
                    (rm, i, rm.module.detect(trace, opts), ctx(trace, opts) if callable(ctx) else None)
                )
            except Exception as e:  # noqa: BLE001 - a failing rule never sinks the run
                res.errors.append(_err(rm, trace, e))
    summaries = [summary_plan(t, roofline=True) for t in traces]
    from traceadvisor.replay.sim import warm_up_for

    for t in traces:  # numba loads while the rules' queries run
        if "timeline" in t.meta.capabilities:
            warm_up_for(t.events.height)
    frames, contexts, summary_frames = _collect(plans, summaries, res)
    res.summaries = [Summary.from_frames(p, f) for p, f in zip(summaries, summary_frames, strict=True)]
    _prepare_replays(traces, res.summaries)
    fixes: dict[int, Any] = {}
    for (rm, i, _, _), df, ctx in zip(plans, frames, contexts, strict=True):
        if df is None:
            continue
        opts = rm.rule.options_for(options.get(rm.code))
        try:
            res.findings.extend(build_findings(rm, traces[i], df, opts, fixes, i, ctx))
        except Exception as e:  # noqa: BLE001
            res.errors.append(_err(rm, traces[i], e))
    res.findings.sort(key=_finding_order)
    from traceadvisor.source import attach

    attach(res.findings, res.traces)
    _predict_all(res, fixes)
    return res


def _prepare_replays(traces: list[Trace], summaries: list[Summary]) -> None:
    """Build each timeline trace's replay model once, on its summary's analysed window."""
    from traceadvisor.replay import replayer

    for t, sm in zip(traces, summaries, strict=True):
        if "timeline" in t.meta.capabilities:
            replayer(t, sm)


def _predict_all(res: AnalysisResult, fixes: dict[int, Any]) -> None:
    """Per trace: the replayed window with every (non-minor) finding's fix applied together."""
    from traceadvisor.replay import Fix
    from traceadvisor.replay.breakdown import critical_path

    for i, trace in enumerate(res.traces):
        rp0 = _replayer(trace)
        if rp0 is not None:
            try:
                res.critical_paths[trace.name] = critical_path(rp0)
            except Exception as e:  # noqa: BLE001 - the breakdown never sinks the run
                res.errors.append(
                    {"rule": "-", "name": "critical-path", "trace": trace.name, "error": repr(e)}
                )
        # a minor finding's fix is not among them: it saves next to nothing, may only be profiler overhead, or
        # replays slower (bf16 autocast on a network whose batch norm gets slower kernels)
        mine = [fixes[id(f)] for f in res.findings if f.trace_index == i and id(f) in fixes and not f.minor]
        rp = _replayer(trace) if mine else None
        if rp is None:
            continue
        p = rp.predict(Fix.merge(mine, f"every fix together ({len(mine)} findings)"))
        res.predictions[trace.name] = {**p.to_dict(), "impact_ns": p.impact_ns, "window_ns": rp.window_ns}


def _collect(
    plans: list[tuple[RuleModule, int, pl.LazyFrame, pl.LazyFrame | None]],
    summaries: list[SummaryPlan],
    res: AnalysisResult,
) -> tuple[list[pl.DataFrame | None], list[pl.DataFrame | None], list[dict[str, pl.DataFrame]]]:
    """Per trace, one collection pass of its rules' frames, evidence contexts and summary views (``_collect_trace``;
    never one set for several traces: polars' optimisation of one plan set grows faster than its size, 13 small
    traces in one ``pl.collect_all`` cost 3x their separate sets); results in ``plans`` order, one summary dict
    per trace."""
    frames: list[pl.DataFrame | None] = [None] * len(plans)
    contexts: list[pl.DataFrame | None] = [None] * len(plans)
    out: list[dict[str, pl.DataFrame]] = []
    for t, s in enumerate(summaries):
        mine = [k for k, p in enumerate(plans) if p[1] == t]
        f, c, o = _collect_trace([plans[k] for k in mine], [s], res)
        for k, df, ctx in zip(mine, f, c, strict=True):
            frames[k], contexts[k] = df, ctx
        out.extend(o)
    return frames, contexts, out


def _collect_trace(
    plans: list[tuple[RuleModule, int, pl.LazyFrame, pl.LazyFrame | None]],
    summaries: list[SummaryPlan],
    res: AnalysisResult,
) -> tuple[list[pl.DataFrame | None], list[pl.DataFrame | None], list[dict[str, pl.DataFrame]]]:
    """Collect the rules' frames, their evidence contexts and the summary views, each once, one plan after the
    other (``collect_plans``); a failing rule sinks only itself (the summary must not fail)."""
    rule_frames: list[pl.DataFrame | None] = []
    for rm, i, lf, _ in plans:
        try:
            rule_frames.append(lf.collect(engine=query.engine()))
        except Exception as e:  # noqa: BLE001 - isolate the failing rule
            res.errors.append(_err(rm, res.traces[i], e))
            rule_frames.append(None)
    contexts: list[pl.DataFrame | None] = [None] * len(plans)
    for k, (rm, i, _, ctx) in enumerate(plans):
        if ctx is None:
            continue
        try:
            contexts[k] = ctx.collect(engine=query.engine())
        except Exception as e:  # noqa: BLE001
            res.errors.append(_err(rm, res.traces[i], e))
            rule_frames[k] = None
    out = [dict(zip(s.frames, collect_plans(list(s.frames.values())), strict=True)) for s in summaries]
    return rule_frames, contexts, out


def _err(rm: RuleModule, trace: Trace, e: Exception) -> dict[str, Any]:
    tb = traceback.extract_tb(e.__traceback__)
    where = f"{tb[-1].filename.rsplit('/', 1)[-1]}:{tb[-1].lineno}" if tb else ""
    return {
        "rule": rm.code,
        "name": rm.rule.name,
        "trace": trace.name,
        "error": f"{type(e).__name__}: {e} ({where})",
    }
