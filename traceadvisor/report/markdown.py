"""The Markdown summary for a pull-request comment (GitHub-flavoured, at most ``LIMIT`` characters).

Sections, in order of importance, so that truncation drops the least useful part first: the traces, the findings
table, the top findings with their evidence and advice (the trace's stack, with the other stack's equivalent),
skipped and failed rules. When the text would pass the limit, whole blocks are left out and a note says how many.
Every string that comes from a trace is escaped (HTML and Markdown specials, pipes, newlines).
"""

from __future__ import annotations

import html
import re
from typing import Any

GITHUB_LIMIT = 65_536  # GitHub rejects a comment longer than this: a hard cap, whatever limit is asked for
LIMIT = 60_000  # the default, with a margin for text a CI job adds around the report
TABLE_ROWS = 60
DETAILS = 10
EVIDENCE_ROWS = 5
STACK_LABELS = {"nvidia": "CUDA (NVIDIA)", "amd": "ROCm (AMD)"}

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]#|~])")  # [ ] escaped: no link or image can form


def md_text(s: Any, max_len: int | None = None) -> str:
    """Escape a string from a trace for Markdown (and the HTML GitHub allows in it): one line, no markup."""
    t = re.sub(r"\s+", " ", str(s))
    if max_len and len(t) > max_len:
        t = t[: max_len - 1] + "…"
    t = html.escape(t, quote=False)  # & < > (GitHub renders the HTML it allows in Markdown)
    t = _MD_SPECIAL.sub(r"\\\1", t)
    return t.replace("@", "@\u200b")  # no accidental @mentions in a PR comment


def md_advice(s: Any) -> str:
    """Advice written by rule authors keeps its `code` spans (unless they hold <, > or &); the rest is escaped."""
    parts = re.split(r"(``.+?``|`[^`]+`)", re.sub(r"\s+", " ", str(s)).strip())
    out = []
    for p in parts:
        if p.startswith("`") and p.endswith("`") and len(p) > 1 and not re.search(r"[<>&]", p):
            out.append("`" + p.strip("`").replace("`", "'") + "`")
        else:
            out.append(md_text(p))
    return "".join(out)


def _dur(ns: float | int | None) -> str:
    from traceadvisor.report.figures import fmt_dur

    return fmt_dur(ns)


def _value(key: str, v: Any, t0: int | None) -> str:
    from traceadvisor.report.html import fmt_value

    return md_text(fmt_value(key, v, t0), 80)


def _trace_lines(res) -> list[str]:
    from traceadvisor.report import summary_view

    lines = []
    for i, t in enumerate(res.traces):
        m = t.meta
        devs = ", ".join(sorted({d.model or d.name or "?" for d in t.active_devices()})) or "no GPU recorded"
        s = res.summary(i)
        steps = s.totals["steps"]
        lines.append(
            f"**{md_text(t.name)}** · {md_text(m.format)} · {md_text(m.vendor)} · {md_text(devs)} · "
            f"span {_dur(t.span_ns())} · {steps} steps · {t.events.height:,} events\\"
        )
        lines.append(md_text(summary_view.line(s)))
        rl = summary_view.roofline_line(s)
        if rl:
            lines.append("")
            lines.append(md_text(rl))
            rows = summary_view.roofline_rows(s)
            heads = list(rows[0])
            lines.append("")
            lines.append("| " + " | ".join(heads) + " |")
            lines.append("|" + "---|" * len(heads))
            lines.extend("| " + " | ".join(md_text(r[h]) for h in heads) + " |" for r in rows)
            lines.append("")
        health = list(m.warnings)
        if m.truncated:
            health.insert(0, "input truncated: only the readable part was imported")
        dropped = m.skipped_split()[1]  # records folded into links/metadata are no health matter
        if dropped:
            health.append(
                f"{sum(dropped.values()):,} input events not imported ("
                + "; ".join(f"{r}: {n:,}" for r, n in sorted(dropped.items(), key=lambda kv: -kv[1]))
                + ")"
            )
        for w in health[:8]:
            lines.append(f"> ⚠️ {md_text(w, 300)}")
        if len(health) > 8:
            lines.append(f"> … and {len(health) - 8} more trace warnings")
    return lines


def _table(res) -> list[str]:
    rows = ["| # | Rule | Impact | Share | Confidence | Count | Summary |", "|--:|---|--:|--:|---|--:|---|"]
    multi = len(res.traces) > 1 or getattr(res, "job", None) is not None
    names = [t.name for t in res.traces]
    same = len(set(names)) < len(names)  # a/x.json and b/x.json: say which one by position
    ranked = [f for f in res.findings if not getattr(f, "minor", False)]
    minor = [f for f in res.findings if getattr(f, "minor", False)]
    for i, f in enumerate(ranked[:TABLE_ROWS], 1):
        label = f"{f.trace} #{f.trace_index + 1}" if same else f.trace
        where = f" ({md_text(label, 44)})" if multi else ""
        rows.append(
            f"| {i} | `{f.rule}` {md_text(f.name)} | {_dur(f.impact_ns)} | {100 * f.share:.1f}% | "
            f"{md_text(f.confidence)} | {f.count:,} | {md_text(f.summary, 300)}{where}{_at(f)} |"
        )
    if len(ranked) > TABLE_ROWS:
        rows.append(
            f"\n_{len(ranked) - TABLE_ROWS} more findings with smaller impact are in the HTML and JSON "
            "reports._"
        )
    if minor:
        rows += ["", f"<details><summary>{len(minor)} minor findings (predicted saving under 0.5% of the window "
                 "or 50 us: not ranked)</summary>", ""]  # fmt: skip
        rows += [
            f"- `{f.rule}` {md_text(f.name)}: {_dur(f.impact_ns)} predicted, {f.count:,} items"
            for f in minor[:20]
        ]
        rows += ["", "</details>"]
    return rows


def _evidence(f, t0: int | None) -> list[str]:
    from traceadvisor.report.html import column_title, order_columns

    items = [r for r in (f.evidence or {}).get("items") or [] if isinstance(r, dict)][:EVIDENCE_ROWS]
    shapes = (f.evidence or {}).get("shapes")
    out: list[str] = []
    for title, rows in (("GEMM shapes", shapes if isinstance(shapes, list) else []), ("Top items", items)):
        rows = [r for r in rows if isinstance(r, dict)][
            : EVIDENCE_ROWS * 2 if title == "GEMM shapes" else EVIDENCE_ROWS
        ]
        if not rows:
            continue
        cols = order_columns(rows)[:8]
        out += [
            "",
            f"<details><summary>{title}</summary>",
            "",
            "| " + " | ".join(md_text(column_title(c)) for c in cols) + " |",
            "|" + "---|" * len(cols),
        ]
        out += ["| " + " | ".join(_value(c, r.get(c), t0) for c in cols) + " |" for r in rows]
        out += ["", "</details>"]
    return out


def _detail(i: int, f, t0: int | None) -> list[str]:
    adv = f.advice or {}
    stack = adv.get("stack", "nvidia")
    other = adv.get("other_stack", "amd" if stack == "nvidia" else "nvidia")
    out = [
        f"#### {i}. `{f.rule}` {md_text(f.title)} — {_dur(f.impact_ns)} ({100 * f.share:.1f}%)",
        "",
        md_text(f.summary, 600),
        "",
    ]
    if getattr(f, "sources", None):
        out.extend(["Where in your code: " + ", ".join(md_text(x, 120) for x in f.sources), ""])
    if adv.get("primary"):
        out.append(f"- **Fix on {STACK_LABELS.get(stack, stack)}:** {md_advice(adv['primary'])}")
    if adv.get("torch"):
        out.append(f"- **PyTorch:** {md_advice(adv['torch'])}")
    if adv.get("common"):
        out.append(f"- **Any stack:** {md_advice(adv['common'])}")
    if adv.get("other"):  # the trace's own stack first; the other one folded away
        label = STACK_LABELS.get(other, other)
        out += ["", f"<details><summary>On {label}</summary>", "", md_advice(adv["other"]), "", "</details>"]
    return out + _evidence(f, t0) + [""]


def _rules(res) -> list[str]:
    out = []
    if res.errors:
        out += [
            "",
            f"**{len(res.errors)} rule(s) failed:** "
            + "; ".join(
                f"`{e['rule']}` on {md_text(e['trace'], 60)}: {md_text(e['error'], 200)}"
                for e in res.errors[:10]
            ),
        ]
    if res.skipped:
        out += [
            "",
            f"<details><summary>{len(res.skipped)} rule(s) skipped: the input lacks the facts they need"
            "</summary>",
            "",
        ]
        out += [
            f"- `{s['rule']}` {md_text(s.get('name', ''))}: {md_text(s['reason'], 200)}"
            for s in res.skipped[:40]
        ]
        out += ["", "</details>"]
    return out


def _at(f) -> str:
    """`` at train.py:88 step`` when the finding names the user's frames."""
    src = getattr(f, "sources", None)
    return f" — at {md_text(src[0], 80)}" if src else ""


def render_markdown(result, limit: int = LIMIT) -> str:
    """A GitHub-flavoured summary of ``result`` of at most ``limit`` characters."""
    import traceadvisor

    t0s = [int(t.events["start_ns"].min() or 0) if t.events.height else None for t in result.traces]
    job = getattr(result, "job", None)
    if job is not None:
        from traceadvisor.report.job import job_markdown

        head = ["## traceadvisor report", ""] + job_markdown(job, md_text)
    else:
        head = ["## traceadvisor report", ""] + _trace_lines(result) + [""]
    if job is None and len(result.traces) > 1:  # several traces: their summaries side by side
        head += _summary_table(result) + [""]
    if result.findings:
        head += [f"### {len(result.findings)} finding(s), ranked by impact", ""] + _table(result) + [""]
    else:
        head += ["**No findings.**", ""]
    foot = [
        "",
        f"<sub>traceadvisor {traceadvisor.__version__} · impact is the saving the replay predicts for each "
        "fix alone (docs/impact.md), share is of the analysed window · the HTML report has the timeline and full evidence.</sub>",
    ]
    blocks: list[list[str]] = []
    if result.findings:
        blocks.append(["### Top findings and what to do", ""])
        for i, f in enumerate([f for f in result.findings if not getattr(f, "minor", False)][:DETAILS], 1):
            blocks.append(_detail(i, f, t0s[f.trace_index] if f.trace_index < len(t0s) else None))
    rules = _rules(result)
    if rules:
        blocks.append(rules)
    text = assemble(head, blocks, foot, min(limit, GITHUB_LIMIT))
    return text if len(text) <= GITHUB_LIMIT else text[: GITHUB_LIMIT - 2].rsplit("\n", 1)[0] + "\n"


def _summary_table(res) -> list[str]:
    """One row per trace: the library summary (window, steps, busy, idle) and how many findings it has."""
    from traceadvisor.report import summary_view

    rows: list[list[str]] = []
    labels: list[str] = []
    for i, t in enumerate(res.traces):
        items = summary_view.items(res.summary(i))
        labels = labels or [k for k, _ in items]
        vals = dict(items)
        n = sum(1 for f in res.findings if f.trace_index == i)
        rows.append([md_text(t.name, 60), *(md_text(vals.get(k, "-"), 80) for k in labels), str(n)])
    head = ["Trace", *(md_text(k) for k in labels), "Findings"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * (len(head) - 1) + "--:|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    from traceadvisor.replay.breakdown import line

    cps = getattr(res, "critical_paths", {}) or {}
    preds = getattr(res, "predictions", {}) or {}
    cp_lines = [(t.name, line(cps.get(t.name, {}), preds.get(t.name))) for t in res.traces]
    cp_lines = [(n, x) for n, x in cp_lines if x]
    if cp_lines:
        out.append("")
        out += [f"- {md_text(n, 60)}: {md_text(x, 300)}" for n, x in cp_lines]
    return out


def assemble(head: list[str], blocks: list[list[str]], foot: list[str], limit: int = LIMIT) -> str:
    """Join head, as many whole blocks as fit, and foot; say how many blocks were left out."""
    note_room = 200
    text = "\n".join(head)
    if len(text) + note_room > limit:  # even the head is too long: cut it at a line boundary
        cut = text[: limit - note_room].rsplit("\n", 1)[0]
        return cut + "\n\n_… truncated to stay under the comment limit; see the HTML or JSON report._\n"
    tail = "\n".join(foot)
    left = 0
    for blk in blocks:
        piece = "\n" + "\n".join(blk)
        if left or len(text) + len(piece) + len(tail) + note_room > limit:
            left += 1
            continue
        text += piece
    if left:
        text += (
            f"\n\n_… {left} more section(s) left out to keep this comment under {limit:,} characters; "
            "see the HTML or JSON report for everything._"
        )
    return text + "\n" + tail + "\n"
