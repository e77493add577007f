"""The HTML report: structure, escaping of hostile trace strings, offline/CSP, aggregation, breakdown frames."""

from __future__ import annotations

import json
import re
import types
from html.parser import HTMLParser

import polars as pl
import pytest

from traceadvisor.engine.loader import load_rules
from traceadvisor.engine.rule import Finding, Rule, RuleModule
from traceadvisor.engine.runner import AnalysisResult, analyze
from traceadvisor.report import figures as F
from traceadvisor.report.html import (
    BUNDLE_TRACE_TYPES,
    CSP,
    doc_html,
    render_html,
    script_json,
    write_html,
)
from traceadvisor.schema.classify import classify_frame
from traceadvisor.schema.columns import conform
from traceadvisor.testing import TraceBuilder
from traceadvisor.trace import Device, SkipKind, Trace, TraceMeta

PAYLOADS = (
    "<script>alert(1)</script>",
    '"><img src=x onerror=alert(1)>',
    "</script><script>alert(2)</script>",
    "<!--<script>alert(3)//-->",
    "<svg onload=alert(4)>",
    "'-alert(5)-'",
    "]]>&lt;b&gt;{{7*7}}",
)
OUR_SCRIPTS = 5  # boot, figures JSON, zoom JSON, plotly.js, report.js

RULE_DOC = """Pageable host copies (test rule).

## What it detects
Copies from pageable memory.

## Why it matters
A pageable copy is staged through a bounce buffer: ``cudaMemcpyAsync`` blocks the host and runs at **8 GB/s**.

- it cannot overlap
- it is slow

## How it is measured
Bytes over duration, see https://docs.nvidia.com/cuda/ for details.

## Known false positives
One-off copies.

## References
- CUDA C++ Best Practices Guide.
"""


def doc_rule(code: str = "MEM001", name: str = "pageable-host-copy", doc: str = RULE_DOC) -> RuleModule:
    mod = types.ModuleType(f"test_{code}")
    mod.__doc__ = doc
    rule = Rule(code=code, name=name, title="Host copies from pageable memory", summary="", advice={})
    return RuleModule(rule=rule, module=mod, path=f"{code}.py")


def small_trace(vendor: str = "nvidia", device: str = "NVIDIA H200", name: str = "small") -> Trace:
    """4 steps of 1 ms: a pageable copy, 30 kernels of several categories, a sync, host ops and launches."""
    b = TraceBuilder(vendor=vendor, device_name=device, name=name)
    kernels = (
        "ampere_bf16_s16816gemm_relu_128x64",
        "vectorized_elementwise_kernel",
        "ncclDevKernel_AllReduce",
        "flash_fwd_kernel",
        "layer_norm_kernel",
        "reduce_kernel",
    )
    for s in range(4):
        t = s * 1000.0
        b.step(s, t, 950)
        b.cpu_op("aten::copy_", t + 1, 200, ext=s)
        b.copy(t + 5, 150, bytes=32 << 20, name="Memcpy HtoD (Pageable -> Device)")
        for j in range(30):
            b.launch(kernels[j % 6], t + 200 + j * 20, t + 210 + j * 22, 15 + (j % 5) * 3)
        b.sync("Stream Sync", t + 880, 30, stream=7)
    return b.build()


def finding(
    trace: Trace,
    rule: str = "MEM001",
    impact_ns: int = 480_000,
    n: int = 4,
    summary: str = "4 copies",
    stack: str = "nvidia",
    evidence: dict | None = None,
    index: int = 0,
) -> Finding:
    t0 = int(trace.events["start_ns"].min())
    items = [
        {
            "name": f"Memcpy HtoD (Pageable -> Device) #{i}",
            "start_ns": t0 + 5_000 + i * 1_000_000,
            "end_ns": t0 + 155_000 + i * 1_000_000,
            "impact_ns": 120_000,
            "bytes": 32 << 20,
            "gbps": 8.1,
            "rank": 0,
            "device": 0,
        }
        for i in range(n)
    ]
    other = "amd" if stack == "nvidia" else "nvidia"
    return Finding(
        rule=rule,
        name="pageable-host-copy",
        title="Host copies from pageable memory",
        summary=summary,
        trace=trace.name,
        trace_index=index,
        rank=0,
        device=0,
        count=n,
        impact_ns=impact_ns,
        share=impact_ns / trace.span_ns(),
        confidence="high",
        evidence=evidence if evidence is not None else {"items": items, "items_total": n, "median_gbps": 8.1},
        advice={
            "stack": stack,
            "primary": f"advice for {stack}: use `pinned` memory",
            "other_stack": other,
            "other": f"advice for {other}",
            "common": "pin host buffers",
            "torch": "`pin_memory=True`",
        },
        ranges=[(r["start_ns"], r["end_ns"]) for r in items],
    )


def hostile_trace() -> Trace:
    """Every name a report shows comes from PAYLOADS: kernels, ops, copies, syncs, steps, device, path."""
    b = TraceBuilder(device_name="GPU " + PAYLOADS[1], name="hostile" + PAYLOADS[0])
    for s in range(3):
        t = s * 1000.0
        b.step(PAYLOADS[s], t, 950)  # type: ignore[arg-type]  (names become "ProfilerStep#<payload>")
        for j, p in enumerate(PAYLOADS):
            b.cpu_op("aten::" + p, t + j * 10, 8, ext=j)
            b.launch("gemm_" + p, t + 100 + j * 20, t + 110 + j * 22, 15)
        b.copy(t + 500, 150, bytes=2 << 20, name="Memcpy HtoD (Pageable -> Device) " + PAYLOADS[1])
        b.sync(PAYLOADS[0], t + 900, 30, stream=7)
    return b.build()


def hostile_result() -> AnalysisResult:
    """The hostile trace through the real rule pack, plus a finding whose every field carries a payload."""
    trace = hostile_trace()
    res = analyze([trace], load_rules())
    t0 = int(trace.events["start_ns"].min())
    ev = {
        "items": [
            {"name": p, p: p, "start_ns": t0 + 100_000, "end_ns": t0 + 200_000, "impact_ns": 1000}
            for p in PAYLOADS
        ],
        "items_total": len(PAYLOADS),
        "note": PAYLOADS[2],
        PAYLOADS[3]: 1,
        "shapes": [
            {
                "m": 16,
                "n": 8192,
                "k": 8192,
                "batch": None,
                "dtype": PAYLOADS[4],
                "calls": 3,
                "tflops": 40.0,
                "utilization": 0.04,
            }
        ],
    }
    f = Finding(
        rule="XSS001",
        name="x" + PAYLOADS[5],
        title=PAYLOADS[0],
        summary=" ".join(PAYLOADS),
        trace=trace.name,
        rank=0,
        device=0,
        count=1,
        impact_ns=10**9,
        share=0.5,
        confidence="high",
        evidence=ev,
        advice={
            "stack": "nvidia",
            "primary": PAYLOADS[1],
            "other_stack": "amd",
            "other": PAYLOADS[0],
            "common": PAYLOADS[2],
            "torch": "`" + PAYLOADS[0] + "`",
        },
        ranges=[(t0 + 100_000, t0 + 200_000)],
    )
    res.findings.insert(0, f)
    res.rules.append(doc_rule("XSS001", "xss", RULE_DOC.replace("Copies from pageable memory.", PAYLOADS[0])))
    res.skipped.append({"rule": "ZZZ001", "name": PAYLOADS[1], "trace": trace.name, "reason": PAYLOADS[0]})
    res.errors.append({"rule": "ZZZ002", "name": "e", "trace": trace.name, "error": PAYLOADS[2]})
    trace.meta.warn("warning " + PAYLOADS[0])
    trace.meta.skip("reason " + PAYLOADS[1], 3, SkipKind.UNSUPPORTED)
    return res


class Tags(HTMLParser):
    """Collects start tags with their attributes, and the raw text of each script element."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag == "script":
            self._in_script = True
            self.scripts.append("")

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.scripts[-1] += data


def parse(html: str) -> Tags:
    p = Tags()
    p.feed(html)
    p.close()
    return p


def island(html: str, id_: str):
    m = re.search(rf'<script type="application/json" id="{id_}">(.*?)</script>', html, re.S)
    assert m, id_
    return json.loads(m.group(1))


@pytest.fixture(scope="module")
def small_html(tmp_path_factory) -> str:
    tr = small_trace()
    res = AnalysisResult(
        traces=[tr],
        findings=[finding(tr, impact_ns=480_000), finding(tr, rule="MEM009", impact_ns=900_000, n=2)],
        skipped=[
            {"rule": "COM001", "name": "exposed-collective", "trace": tr.name, "reason": "needs collectives"}
        ],
        rules=[doc_rule()],
    )
    res.findings.sort(key=lambda f: -f.impact_ns)
    out = tmp_path_factory.mktemp("rep") / "small.html"
    assert write_html(res, out) == out
    return out.read_text(encoding="utf-8")


def test_self_contained_offline_and_csp(small_html):
    assert f'<meta http-equiv="Content-Security-Policy" content="{CSP}">' in small_html
    assert "default-src 'none'" in CSP and "unsafe-eval" not in CSP
    p = parse(small_html)
    assert "plotly.js (basic - minified) v" in small_html  # the partial bundle is embedded, not linked
    assert len(small_html.encode()) <= 2_000_000  # the partial bundle keeps a small report small
    for tag, attrs in p.tags:
        assert "src" not in attrs, (tag, attrs)  # nothing loaded: no script/img/iframe sources
        assert tag not in ("link", "iframe", "object", "embed", "img")
        href = attrs.get("href")
        if href:  # only in-page anchors and plain navigation links from rule docs
            assert href.startswith("#") or (href.startswith("https://") and attrs.get("rel")), href
    assert len(p.scripts) == OUR_SCRIPTS


def test_header_findings_and_sections(small_html):
    assert "NVIDIA H200" in small_html and "H200 SXM 141GB" in small_html
    assert re.search(r"<dt>Steps</dt><dd>4 analysed", small_html)
    assert "rules skipped" in small_html.lower() and "needs collectives" in small_html
    # findings in impact order, each with its own section and a timeline button
    assert small_html.index('id="finding-f1"') < small_html.index('id="finding-f2"')
    f1 = small_html[small_html.index('id="finding-f1"') : small_html.index('id="finding-f2"')]
    assert "MEM009" in f1 and "900 µs" in f1
    assert 'data-finding="f1"' in small_html and 'data-finding="f2"' in small_html
    # why it matters from the rule's own docstring, rendered (code, bold, list), other docs folded away
    assert "<code>cudaMemcpyAsync</code>" in small_html and "<strong>8 GB/s</strong>" in small_html
    assert "<li>it cannot overlap</li>" in small_html and "One-off copies." in small_html
    # evidence table: durations, bytes, bandwidth and trace-relative times, with per-row zoom buttons
    assert "32 MiB" in f1 and "8.1 GB/s" in f1 and "120 µs" in f1 and "<td>0.005</td>" in f1
    assert "data-x0=" in f1


def test_advice_for_the_trace_stack_beside_the_other(small_html):
    assert "Fix on CUDA (NVIDIA)" in small_html and "Equivalent on ROCm (AMD)" in small_html
    assert small_html.index("advice for nvidia") < small_html.index("advice for amd")
    amd = small_trace(vendor="amd", device="AMD Instinct MI300X", name="amdtrace")
    html = render_html(AnalysisResult(traces=[amd], findings=[finding(amd, stack="amd")], rules=[doc_rule()]))
    assert "Fix on ROCm (AMD)" in html and "Equivalent on CUDA (NVIDIA)" in html
    assert html.index("advice for amd") < html.index("advice for nvidia")
    assert "MI300X" in html and "CUs" in html


def test_figures_and_zoom_targets(small_html):
    figs = island(small_html, "ta-figures")
    assert set(figs) == {"timeline-0", "cat-0", "busy-0", "steps-0"}
    tl = figs["timeline-0"]
    names = {t.get("name") for t in tl["data"]}
    assert {"gemm", "copy", "sync", "cpu op", "runtime API", "collective"} <= names
    ticks = tl["layout"]["yaxis"]["ticktext"]
    assert ticks[:2] == ["#1 MEM009 pageable-host-copy", "#2 MEM001 pageable-host-copy"]
    assert "GPU 0 · stream 7" in ticks and "CPU thread 1" in ticks
    assert len(tl["layout"]["shapes"]) == 4  # one band per step
    zoom = island(small_html, "ta-zoom")
    assert zoom["f2"]["fig"] == "timeline-0" and len(zoom["f2"]["ranges"]) == 4
    assert zoom["f2"]["ranges"][1] == pytest.approx([1.005, 1.155])
    assert "All 252 events" in small_html  # small traces are drawn exactly, and the page says so
    types = {t.get("type", "scatter") for f in figs.values() for t in f["data"]}
    assert types <= BUNDLE_TRACE_TYPES, "a trace type the shipped plotly.js bundle cannot draw"


def test_hostile_strings_are_text_everywhere(tmp_path):
    res = hostile_result()
    assert any(f.rule == "MEM001" for f in res.findings), "a real rule reports the hostile copy names"
    html = write_html(res, tmp_path / "x.html").read_text(encoding="utf-8")
    for p in PAYLOADS:
        assert p not in html, p
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html  # shown, as text
    p = parse(html)
    assert len(p.scripts) == OUR_SCRIPTS
    assert [t for t, _ in p.tags if t in ("img", "svg", "iframe", "object", "embed")] == []
    assert [(t, a) for t, attrs in p.tags for a in attrs if a.startswith("on")] == []
    for body in p.scripts[1:3]:  # the JSON islands: no way out of the script element
        assert "</" not in body and "<!--" not in body and "<" not in body
    figs = island(html, "ta-figures")
    texts = [
        s for fig in figs.values() for tr in fig["data"] for s in (tr.get("text") or []) if isinstance(s, str)
    ]
    texts += [a["text"] for fig in figs.values() for a in fig["layout"].get("annotations", [])]
    texts += [t for fig in figs.values() for t in fig["layout"].get("yaxis", {}).get("ticktext", []) or []]
    joined = "\n".join(texts)
    assert "gemm_&lt;script&gt;alert(1)&lt;/script&gt;" in joined  # plotly hover text is entity-escaped
    assert "ProfilerStep#&lt;script&gt;" in joined
    plain = re.sub(r"<br>", " ", joined)
    assert "<" not in plain and ">" not in plain.replace("&gt;", "")


def test_script_json_and_doc_html_escape():
    s = script_json({"a": "</script><!-- \u2028 & <b>"})
    assert "<" not in s and ">" not in s and "&" not in s and "\u2028" not in s
    assert json.loads(str(s)) == {"a": "</script><!-- \u2028 & <b>"}
    h = doc_html("Use `x<y>` and **<b>bold</b>**\n\n- one <script>\n- two")
    assert str(h) == (
        "<p>Use <code>x&lt;y&gt;</code> and <strong>&lt;b&gt;bold&lt;/b&gt;</strong></p>"
        "<ul><li>one &lt;script&gt;</li><li>two</li></ul>"
    )
    assert F.esc('<a href="x">\'&') == "&lt;a href=&#34;x&#34;&gt;&#39;&amp;"


def big_trace(kernels: int = 30_000, host: int = 50_000) -> Trace:
    """One busy stream and one busy host thread, built as frames (fast at this size)."""
    k = pl.DataFrame(
        {
            "kind": "kernel",
            "name": [f"k{i % 7}_gemm" if i % 3 else f"k{i % 5}_relu" for i in range(kernels)],
            "start_ns": pl.int_range(0, kernels, eager=True) * 10_000,
            "dur_ns": pl.int_range(0, kernels, eager=True) % 13 * 500 + 1000,
            "device": 0,
            "stream": 7,
            "pid": 0,
            "tid": 7,
            "rank": 0,
        }
    )
    h = pl.DataFrame(
        {
            "kind": "cpu_op",
            "name": "aten::add",
            "start_ns": pl.int_range(0, host, eager=True) * 6_000,
            "dur_ns": 4_000,
            "pid": 10,
            "tid": 11,
            "rank": 0,
        }
    )
    quiet = pl.DataFrame(
        {
            "kind": "cpu_op",
            "name": "idle thread op",
            "start_ns": [0],
            "dur_ns": [10],
            "pid": 10,
            "tid": 12,
            "rank": 0,
        }
    )
    df = conform(pl.concat([k, h, quiet], how="diagonal_relaxed"))
    df = classify_frame(df).select(df.columns)
    meta = TraceMeta(
        path="big.json",
        format="synthetic",
        vendor="nvidia",
        devices=[Device(0, "NVIDIA H200")],
        capabilities={"timeline", "kernels", "cpu_ops"},
    )
    return Trace(df, meta)


def test_timeline_aggregates_what_cannot_be_drawn():
    tr = big_trace()
    td = F.timeline_data(tr, [("f1", "#1 X", [(0, 1000)])], max_segments=3000, buckets=500)
    lanes = td.lanes.filter(pl.col("group") != "finding")
    assert lanes["label"].to_list() == [
        "GPU 0 · stream 7",
        "CPU thread 11",
    ]  # the near-idle thread is left out
    assert td.segments.height == 3000 and int(lanes["drawn"].sum()) == 3000
    assert (lanes["drawn"] + lanes["merged"]).to_list() == lanes["events"].to_list() == [30_000, 50_000]
    assert int(td.blocks["n"].sum()) == int(lanes["merged"].sum())  # every merged event is in a block
    assert td.blocks.height <= 2 * 500
    kept = td.segments.filter(pl.col("lane") == 1)  # the longest kernels are the ones drawn one by one
    assert kept.select((pl.col("end_ns") - pl.col("start_ns")).min()).item() >= 6000
    assert any("merged into" in n for n in td.notes) and any("host thread" in n for n in td.notes)
    fig = F.timeline_figure(td)
    n_points = sum(len(t.get("text") or ()) for t in fig["data"])
    assert n_points <= 3 * (3000 + td.blocks.height) + 10
    html = render_html(AnalysisResult(traces=[tr], findings=[]), timeline_opts={"max_segments": 3000})
    assert "Aggregated for speed" in html and "busy blocks" in html


def test_host_lanes_by_busy_time_in_any_row_order():
    """The busiest threads are picked by the union of their events (overlaps counted once), whether or not
    the rows come in start order (in order, the lanes skip the sort)."""
    nested = [(s, 5000) for s in range(0, 100_000, 10_000)] * 50  # 50 copies of 10 spans: 50 us busy
    apart = [(s, 5000) for s in range(0, 200_000, 10_000)][::-1]  # 20 disjoint spans, last first: 100 us
    rows = [(10, 1, s, d) for s, d in nested] + [(10, 2, s, d) for s, d in apart]
    df = pl.DataFrame(rows, schema=["pid", "tid", "start_ns", "dur_ns"], orient="row").with_columns(
        kind=pl.lit("cpu_op"), name=pl.lit("op"), rank=pl.lit(0)
    )
    meta = TraceMeta(path="t.json", format="synthetic", capabilities={"timeline", "cpu_ops"})
    for frame in (df.sort("start_ns"), df):
        tr = Trace(conform(frame), meta)
        ev, lanes, notes = F.lane_events(tr, max_cpu_lanes=1)
        assert lanes["label"].to_list() == ["CPU thread 2"] and lanes["events"].to_list() == [20]
        assert ev.height == 20 and "1 host thread(s)" in notes[0] and "(500 host events)" in notes[0]


def test_lane_caps_share_the_budget():
    assert F.lane_caps([10, 100_000, 50_000], 1000) == [10, 495, 495]
    assert F.lane_caps([5, 6], 1000) == [5, 6]
    caps = F.lane_caps([400, 3000, 9000, 20], 2000)
    assert sum(caps) <= 2000 and caps[3] == 20 and caps[0] == 400


def test_merge_blocks_runs():
    ev = pl.DataFrame(
        {
            "lane": [0, 0, 0, 0, 1],
            "key": ["gemm", "gemm", "gemm", "copy", "gemm"],
            "start_ns": [0, 10, 25, 40, 0],
            "end_ns": [5, 15, 28, 45, 3],
            "dur_ns": [5, 5, 3, 5, 3],
        }
    )
    b = F.merge_blocks(ev, 0, 10)
    assert b.select("lane", "key", "start_ns", "end_ns", "n", "busy_ns").rows() == [
        (0, "gemm", 0, 28, 3, 13),
        (0, "copy", 40, 45, 1, 5),
        (1, "gemm", 0, 3, 1, 3),
    ]


def test_breakdown_frames_are_exact():
    b = TraceBuilder()
    b.step(0, 0, 1000)
    b.kernel("sgemm_128", 100, 100)
    b.kernel("sgemm_128", 150, 150, stream=8)  # overlaps the first: busy union 100..300
    b.kernel("relu_kernel", 500, 100)
    b.kernel("relu_kernel", 990, 20)  # starts in the step, ends after it: clipped to the step
    b.copy(2000, 10, bytes=1 << 20)
    t = b.build()
    from traceadvisor.summary import summarize

    s = summarize(t)
    cat = F.gpu_category_frame(s)
    # the copy at 2 ms starts after the only step: outside the analysed window
    assert dict(cat.select("category", "time_ns").iter_rows()) == {"gemm": 250_000, "elementwise": 120_000}
    st = F.step_frame(s)
    assert dict(st.select("category", "time_ns").iter_rows()) == {
        "gemm": 250_000,
        "elementwise": 120_000,  # GPU time of the work launched in the step (the summary's per-step view)
        "idle": 690_000,  # the step's time (to its last kernel's end, 1.01 ms) minus the busy union 320 us
    }
    bi = F.busy_idle_frame(s)
    # window 0 .. 1.01 ms (the step, widened to the kernel that ends after it); busy 200 + 100 + 20 us
    assert bi.select("busy_ns", "idle_ns").row(0) == (320_000, 690_000)


def test_gemm_roofline_from_shapes():
    from traceadvisor.devices import BY_KEY
    from traceadvisor.roofline import gemm_points

    g = F.gemm_frame(
        gemm_points(
            [
                {
                    "m": 8192,
                    "n": 8192,
                    "k": 8192,
                    "batch": None,
                    "dtype": "torch.bfloat16",
                    "calls": 5,
                    "tflops": 783.4,
                    "utilization": 0.79,
                },
                {
                    "m": 64,
                    "n": 64,
                    "k": 64,
                    "batch": 512,
                    "dtype": "c10::Half",
                    "calls": 5,
                    "tflops": 5.6,
                    "utilization": 0.006,
                },
            ],
            BY_KEY["H200 SXM 141GB"],
        )
    )
    assert g["intensity"].to_list() == pytest.approx([8192 / 3, 64 / 3])
    assert g["peak"].to_list() == [989.5, 989.5] and g["dtype"].to_list() == ["bf16", "fp16"]
    fig = F.gemm_figure(g, 4.8, "H200")
    assert fig.layout["xaxis"]["type"] == "log" and fig.layout["yaxis"]["type"] == "log"
    roofs = [t for t in fig.data if t["mode"] == "lines"]
    assert roofs and max(max(t["y"]) for t in roofs) == 989.5 and min(min(t["y"]) for t in roofs) < 989.5


def test_real_trace_report(traces_dir, tmp_path):
    from traceadvisor.analysis import analyze_paths

    res = analyze_paths([traces_dir / "torch" / "h200_gemm_mix.pt.trace.json.gz"], use_config=False)
    html = write_html(res, tmp_path / "gm.html").read_text(encoding="utf-8")
    figs = island(html, "ta-figures")
    gem = next(f for f in res.findings if f.rule == "GEM001")
    i = res.findings.index(gem) + 1
    assert f"gemm-f{i}" in figs, "the GEMM chart is fed from GEM001's shapes"
    assert {t.get("type", "scatter") for f in figs.values() for t in f["data"]} <= BUNDLE_TRACE_TYPES
    pts = [t for t in figs[f"gemm-f{i}"]["data"] if t.get("mode") == "markers+text"]
    assert sum(len(t["x"]) for t in pts) == len(gem.evidence["shapes"])
    rm = next(r for r in res.rules if r.code == "GEM001")
    why = rm.section("Why it matters").split()[:6]
    assert " ".join(why) in re.sub(r"<[^>]+>", "", html)  # why it matters, from the rule's own docstring
    assert "H200 SXM 141GB" in html and "Equivalent on ROCm (AMD)" in html


def test_several_traces_get_their_own_timelines():
    a, b = small_trace(name="rank0"), small_trace(vendor="amd", device="AMD Instinct MI300X", name="rank1")
    res = AnalysisResult(
        traces=[a, b],
        findings=[finding(b, impact_ns=900_000, stack="amd", index=1), finding(a)],
        rules=[doc_rule()],
    )
    html = render_html(res)
    figs = island(html, "ta-figures")
    assert {"timeline-0", "timeline-1", "cat-1", "steps-1"} <= set(figs)
    zoom = island(html, "ta-zoom")
    assert zoom["f1"]["fig"] == "timeline-1" and zoom["f2"]["fig"] == "timeline-0"
    assert figs["timeline-1"]["layout"]["yaxis"]["ticktext"][0] == "#1 MEM001 pageable-host-copy"
    assert html.count("<h1>rank") == 2 and "(rank1)" in html  # findings say which trace they belong to


def test_trace_health_is_shown():
    tr = small_trace()
    tr.meta.truncated = True
    tr.meta.input_events = 1000
    tr.meta.warn("clock went backwards twice")
    tr.meta.skip("unknown phase", 7, SkipKind.UNSUPPORTED)
    html = render_html(AnalysisResult(traces=[tr]))
    health = html[html.index('class="health"') : html.index("</ul>", html.index('class="health"'))]
    assert "The input is truncated" in health and "clock went backwards twice" in health
    tr.meta.skip(
        "flow event (stored in args.flows of its slice)", 50, SkipKind.FOLDED_INTO
    )  # no health matter
    html = render_html(AnalysisResult(traces=[tr]))
    health = html[html.index('class="health"') : html.index("</ul>", html.index('class="health"'))]
    assert "7 input events of 1,000 read were not imported (unknown phase: 7)" in health
    assert "args.flows" not in health


@pytest.mark.parametrize(
    "js",
    ["a</script>b", "x</SCRIPT y <!-- z", "ok </div> </", "", "a</scrip", "<!-- only", "</sCrIpT></script"],
)
def test_inlined_javascript_cannot_close_its_script_block(js):
    from traceadvisor.report.html import script_safe

    out = script_safe(js)
    assert "</script" not in out.lower() and "<!--" not in out
    assert out == re.sub(r"</(script)", r"<\\/\1", js, flags=re.IGNORECASE).replace("<!--", "<\\!--")
