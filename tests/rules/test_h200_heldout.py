"""Held-out-style real traces of fixtures/h200_heldout (facts.json): user-style torch.profiler code (with and
without a schedule) and one nsys export, on models no rule was developed on (BERT, OPT, Llama, ConvNeXt,
EfficientNet, ResNet-18, a plain MLP; batch 3: unfused vs fused optimizers on ResNet-50, ViT-B, BERT and
GPT-2; batches 4-5: foreach AdamW on BERT batch 64 and ViT-S, FP32 ViT-S, a pin_memory=False DataLoader, an MLP
with an odd hidden size, a per-step loss.item() on a GPU-bound ViT-S, a decode loop reading a flag per token, a
torch.compile'd MLP compiled inside the window; batch 7: four earlier programs under Nsight Systems, the
EfficientNet with no or one DataLoader worker, the GPU-bound and the host-bound synchronize; batch 8, on an H100:
Llama, BERT, GPT-2, ResNet-50 and ConvNeXt-T training and Llama prefill eager against torch.compile, FUS001; batch 9:
a compiled BERT whose attention ran as memory-bound FP32 GEMMs, TF32 on, GEM002; batch 10: ViT-S and BERT training
programs with three or four problems at once, each fix timed alone and all together, and profiled with and without
every recording option; batch 11: compiled hand-written attention, ATT001; batch 12: Faster R-CNN, PRC001; batches
13-14: padded vocabularies, CUDA graphs, TF32, allocator settings; batch 15: a per-step loss.item() on a balanced and
a host-bound Swin-T loop, a warmed compiled ConvNeXt-T; batches 16-18: MEM003 on ViT-S and GPT-2, channels_last on
ResNet-50 bf16 and FP32, ResNeXt-50, MobileNetV2, EfficientNet-B0, DenseNet-121, RegNetY and ConvNeXt-T). Each
checks the findings a correct analysis must report and must not, and for the single-fix pairs the predicted share
against the saving measured without the profiler."""

from __future__ import annotations

import json

import pytest
from analysed import analysed as analysed_once
from conftest import ROOT

from traceadvisor.analysis import analyze_paths
from traceadvisor.engine.loader import load_rules
from traceadvisor.roofline import roofline_summary

HELD = ROOT / "fixtures" / "h200_heldout"
FACTS = json.loads((HELD / "facts.json").read_text())
FILES = sorted(k for k in FACTS if not k.startswith("_"))
PAIRS = sorted(k for k in FILES if FACTS[k].get("fix_rule"))
MULTI = sorted(k for k in FILES if FACTS[k].get("fixes"))
STACKED = sorted(k for k in FILES if FACTS[k].get("plain_trace"))


def _params(names: list[str], check: str) -> list:
    """The files, a known defect of ``check`` ("findings" or "saving", facts.json ``known_defect``) as a strict
    xfail: it fails until the defect is fixed, then the fixed file must pass."""
    out = []
    for n in names:
        why = FACTS[n].get("known_defect", {}).get(check)
        out.append(pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=why)) if why else n)
    return out


@pytest.fixture(scope="module")
def analysed():
    """(trace, analysis) of a fixture file, analysed once per test process (tests/analysed.py)."""

    def get(name):
        res = analysed_once(HELD / name)
        return res.traces[0], res

    return get


def _share(res, code: str) -> float:
    """The predicted share of ``code``'s finding (a minor one included), 0 when it is not reported; ``A+B``: the
    sum of both rules' shares, for one fix that makes both changes on different kernels (torch.compile fusing the
    elementwise chains and padding an odd GEMM dimension)."""
    codes = code.split("+")
    return sum(f.share or 0.0 for f in res.findings if f.rule in codes)


@pytest.mark.parametrize("name", _params(FILES, "findings"))
def test_expected_findings_and_no_false_alarms(name, analysed):
    _, res = analysed(name)
    assert not res.errors, res.errors
    got = {f.rule for f in res.findings if not f.minor}
    for want in FACTS[name]["expect"]:  # "A|B": either rule
        assert set(want.split("|")) & got, f"missing {want}: {sorted(got)}"
    assert not (set(FACTS[name]["absent"]) & got), f"false alarms {set(FACTS[name]['absent']) & got}"


@pytest.mark.parametrize("name", _params(PAIRS, "saving"))
def test_predicted_saving_against_the_fix_measured(name, analysed):
    """Within max(30% of the measured saving, 3 points), the calibration tolerance of issue 12: a sync or a
    per-step read with a busy GPU behind it saves ~1% when removed, and must not be predicted as a bottleneck. A fix
    measured slower must be predicted as no saving (a share can not go below 0)."""
    _, res = analysed(name)
    rec = FACTS[name]
    measured = rec["measured"]["saving_pct"] / 100
    predicted = _share(res, rec["fix_rule"])
    if measured < 0:
        assert predicted <= max(0.0, measured + 0.03), (rec["fix_rule"], predicted, measured)
        return
    assert abs(predicted - measured) <= max(0.3 * measured, 0.03), (rec["fix_rule"], predicted, measured)


@pytest.mark.parametrize(
    "name", [f"h100_ho_{k}_train_amp_fp32.pt.trace.json.gz" for k in ("mobilenet_v2", "densenet121", "t5")]
)
def test_autocast_measured_slower_is_replayed_slower(name, analysed):
    """Three networks PRC001's batch norm and depthwise models were not measured on, where bf16 autocast made the
    step slower (MobileNetV2 -6.2 %, DenseNet-121 -5.2 %, T5-small -1.6 %; H100): the fix replays slower (-1.9 %,
    -2.0 %, -6.4 %), so the finding is minor with no saving (MobileNetV2 replayed 10.6 % faster without the native
    batch norm)."""
    _, res = analysed(name)
    (f,) = [f for f in res.findings if f.rule == "PRC001"]
    assert f.minor and f.impact_ns == 0
    assert f.prediction["after_ns"] > f.prediction["before_ns"]


def _first_reported(res, alternatives: str) -> str | None:
    """The first rule of ``A|B`` that has a finding (a minor one included)."""
    return next((c for c in alternatives.split("|") if any(f.rule == c for f in res.findings)), None)


@pytest.mark.parametrize("name", _params(MULTI, "saving"))
def test_each_fix_of_a_program_with_several_problems_against_its_own_saving(name, analysed):
    """One program with several problems, each fix timed alone: each rule's predicted share, with the others
    present, within the calibration tolerance of its own measured saving (ViT-S: pinned copies 7.5 vs 8.5 %, the
    per-step item 1.1 vs 0.1 %, TF32 50.3 vs 46.2 %, fused AdamW 0.4 vs -0.5 %; host-bound BERT: DataLoader workers
    5.8 vs 7.1 %, the item 4.6 vs 6.8 %, fused AdamW 9.0 vs 7.4 %)."""
    _, res = analysed(name)
    for alternatives, pct in FACTS[name]["fixes"].items():
        code = _first_reported(res, alternatives) or alternatives.split("|")[0]
        measured, predicted = pct / 100, _share(res, code)
        assert abs(predicted - measured) <= max(0.3 * measured, 0.03), (code, predicted, measured)


@pytest.mark.parametrize("name", _params(MULTI, "saving"))
def test_every_applied_fix_together_against_the_program_with_all_of_them(name, analysed):
    """The replay of the applied fixes merged (the report's "every fix together", of those rules only) against
    the program with all of them applied (ViT-S: 59.1 vs 56.8 %, its minor OPT001 left out; BERT: 17.6 vs 14.9 %)."""
    _, full = analysed(name)
    codes = [c for c in (_first_reported(full, a) for a in FACTS[name]["fixes"]) if c]
    res = analyze_paths([HELD / name], select=codes)
    (pred,) = res.predictions.values()
    measured = FACTS[name]["all_saving_pct"] / 100
    predicted = pred["impact_ns"] / pred["window_ns"]
    assert abs(predicted - measured) <= max(0.3 * measured, 0.03), (codes, predicted, measured)


@pytest.mark.parametrize("name", FILES)
def test_every_fix_together_saves_at_least_its_best_fix_alone(name, analysed):
    """The report's "every fix together" (the fixes of the findings that are not minor, merged) saves at least what
    its best window fix saves alone, less 2 % of the window. Two fixes that set one kernel keep the shorter duration
    (FP32 ResNet-50 once saved 16.4 ms together against 48.8 ms for FUS001 alone: PRC001, merged last, gave the fused
    kernels back their bf16 time), and a fix replayed slower stays out (MobileNetV2: 0 % together)."""
    _, res = analysed(name)
    alone = [
        f.impact_ns
        for f in res.findings
        if not f.minor
        and "before_ns" in (f.prediction or {})
        and f.prediction.get("scope", "window") == "window"
    ]
    if not alone:
        pytest.skip("no finding with a window fix")
    (pred,) = res.predictions.values()
    assert pred["impact_ns"] >= max(alone) - 0.02 * pred["window_ns"], (pred, max(alone))


@pytest.mark.parametrize("name", _params(STACKED, "findings"))
def test_every_recording_option_gives_the_same_findings(name, analysed):
    """The same program profiled with ``with_stack``, ``profile_memory`` and ``with_flops`` on (Python-function
    and memory events, a larger per-op cost): the same findings, each share within 3 points."""
    _, plain = analysed(FACTS[name]["plain_trace"])
    _, rich = analysed(name)
    shares = [{f.rule: f.share for f in r.findings if not f.minor} for r in (plain, rich)]
    assert set(shares[0]) == set(shares[1]), shares
    for code, share in shares[0].items():
        assert abs(shares[1][code] - share) <= 0.03, (code, share, shares[1][code])


@pytest.mark.parametrize(
    "name", ["h200_ho_convnext_atto_cold.pt.trace.json.gz", "h200_ho_mlp_compile_cold.pt.trace.json.gz"]
)
def test_cold_start_is_the_whole_first_step(name, analysed):
    """cudnn.benchmark's algorithm search (63k kernels, 1 s of GPU work) and first-call costs fill the first step
    (21.2 s of 21.3 s); torch.compile's compilation and autotuning of a small MLP 9.0 s of 9.02 s. Warming up
    before the window saves all but one steady step."""
    _, res = analysed(name)
    (f,) = [f for f in res.findings if f.rule == "WRM001"]
    steps = FACTS[name]["profiled_step_ms"]
    expected = FACTS[name]["first_step_extra_ms"] / sum(steps)
    assert abs(f.share - expected) <= 0.03, (f.share, expected)


@pytest.mark.parametrize(
    "name",
    ["h200_ho_bert_warm_sched.pt.trace.json.gz", "h200_ho_opt_item_end.pt.trace.json.gz"],
)
def test_autocast_gemms_are_costed_in_bf16(name, analysed):
    """Under autocast aten::linear records FP32 inputs; its GEMM runs in bf16, so the roofline uses the bf16
    peak and no family can pass 100% of its roofline."""
    t, _ = analysed(name)
    r = roofline_summary(t)
    assert all(f["pct_of_roofline"] <= 100.0 for f in r["families"]), r["families"]
    lin = [o for o in r["ops"] if o["op"] == "aten::linear"]
    assert lin and all(o["dtype"] == "bf16" for o in lin)


def test_unfused_attention_in_training_matches_the_backward_chains(analysed):
    """BART with eager attention, 18 attentions per step (6 encoder, 6 decoder self, 6 cross) over 3 steps: each
    has a forward and a backward GEMM -> softmax -> GEMM chain, and the fix removes their host ops too (the step is
    host-bound: the forward chains' GPU time alone predicted 2.7 % against 11.3 % measured)."""
    _, res = analysed("h200_ho_bart_eager_attn.pt.trace.json.gz")
    (f,) = [f for f in res.findings if f.rule == "ATT001"]
    assert f.count == 18 * 3 * 2
    assert "512" in f.evidence["shapes"]  # the cross-attention's 128 x 512 scores


def test_a_graph_saving_that_may_be_profiler_overhead_is_minor(analysed):
    """ViT-S is GPU-bound without the profiler (36.7 ms per step, 34.2 ms of GPU work) and host-bound under it: its
    graph-launch saving (35 % at 2.5 us per recorded event) vanishes at the trace's high per-event cost, so
    IDL001/LNC001 are minor with the sensitivity in their evidence; the host-bound BERT (4.5 ms of GPU work in a
    49.3 ms step) keeps its finding at both costs (docs/impact.md)."""
    _, res = analysed("h200_ho_vit_s_bf16_warm.pt.trace.json.gz")
    graph = [f for f in res.findings if f.rule in ("IDL001", "LNC001")]
    assert graph and all(f.minor for f in graph)
    for f in graph:
        lo, hi = f.evidence["profiler_overhead"]["saving_pct"]
        assert lo > 20 and hi < 5, (lo, hi)
    _, res = analysed("h200_ho_bert_adamw_loop.pt.trace.json.gz")
    graph = [f for f in res.findings if f.rule in ("IDL001", "LNC001")]
    assert graph and not any(f.minor or "profiler_overhead" in f.evidence for f in graph)


def _matched_overhead(rp, steps: int, base_ms: float) -> float:
    """The per-event profiler cost (ns) at which the replayed step is the measured unprofiled one (bisection: the
    replayed window shrinks as the cost grows)."""
    lo, hi = 0.0, 30_000.0
    for _ in range(18):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if rp.at_overhead(mid).window_ns / steps / 1e6 > base_ms else (lo, mid)
    return (lo + hi) / 2


@pytest.mark.parametrize(
    "name,rule,tol",
    [
        ("h200_ho_bert_compiled_warm.pt.trace.json.gz", "LNC001", 0.05),
        ("h200_ho_bert_adamw_loop.pt.trace.json.gz", "OPT001", 0.15),
        ("h200_ho_vit_b_adamw_loop.pt.trace.json.gz", "OPT001", 0.15),
        ("h200_ho_resnet50_sgd_loop.pt.trace.json.gz", "OPT001", 0.15),
        ("h200_ho_bert_adamw_foreach.pt.trace.json.gz", "OPT001", 0.15),
        ("h200_ho_gpt2_adamw_foreach.pt.trace.json.gz", "OPT001", 0.15),
        ("h200_ho_bert64_adamw_foreach.pt.trace.json.gz", "OPT001", 0.15),
        ("h200_ho_vit_s_adamw_foreach.pt.trace.json.gz", "OPT001", 0.15),
        pytest.param(
            "h200_ho_gpt2_generate.pt.trace.json.gz",
            "LNC001",
            0.15,
            marks=pytest.mark.xfail(
                strict=True,
                reason="the graph fix takes the whole generate() call (no steps) as one graph: 20.5 ms replayed "
                "against 63.0 ms measured with a static cache + reduce-overhead, which graphs each token's forward "
                "and keeps generate()'s eager per-token work (1.4 ms per token)",
            ),
        ),
    ],
)
def test_the_fix_replays_the_fixed_step_once_the_baseline_matches(name, rule, tol, analysed):
    """Where a prediction leans high, the fix model or the profiler's cost is wrong: at the per-event cost that
    makes the replayed base step the measured one (15.8 us on the compiled BERT, 2.6-10.6 us on the optimizer
    pairs, against 2.5 us assumed for eager programs), the fixed replay is the measured fixed step (compiled BERT's graphs: 3.84 vs
    3.79 ms; the optimizer pairs -3 to +9 %, ViT-B's loop -14 %: its per-parameter ops cost more profiler time
    than the trace's average event), so the lean is the unprofiled baseline's (docs/impact.md)."""
    from traceadvisor.replay import replayer

    t, res = analysed(name)
    rm = {r.code: r for r in load_rules([])}[rule]
    opts = rm.rule.defaults()
    fx = rm.module.fix(rm.module.detect(t, opts).collect(), t, opts)
    rp = replayer(t)
    steps = int(res.summary(0).steps["analysed"].sum()) or 1  # a plain block: the window is one call
    m = FACTS[name]["measured"]
    after = rp.at_overhead(_matched_overhead(rp, steps, m["base_ms"])).predict(fx).after_ns / steps / 1e6
    assert after == pytest.approx(m["fixed_ms"], rel=tol), (after, m["fixed_ms"])


def test_a_compiled_program_costs_the_profiler_more_per_event(analysed):
    """torch.compile'd programs: 2.5 us plus 20 us times the Triton share of the kernels (15.9 us on the compiled
    BERT, whose measured step needs 15.8 us); eager programs keep 2.5 us (docs/impact.md)."""
    from traceadvisor.replay import profiler_overhead_ns

    t, _ = analysed("h200_ho_bert_compiled_warm.pt.trace.json.gz")
    assert profiler_overhead_ns(t) == pytest.approx(15_900, rel=0.02)
    t, _ = analysed("h200_ho_bert_adamw_loop.pt.trace.json.gz")
    assert profiler_overhead_ns(t) == 2_500


@pytest.mark.parametrize(
    "name",
    [
        "h200_ho_vit_b_bf16_warm.pt.trace.json.gz",
        "h200_ho_resnet18_pinned.pt.trace.json.gz",
        "h200_ho_mlp_odd_hidden_fixed.pt.trace.json.gz",
    ],
)
def test_gpu_work_queued_before_the_trace_is_not_the_window(name, analysed):
    """A GPU-bound loop profiled with a schedule: the first recorded step starts while the GPU still runs the
    warm-up step's kernels, whose launches are not in the trace (ViT-B: 440 activities, 46 ms). The window starts
    when they are done, so the replayed step is the measured one (ViT-B 94.3 vs 92.5 ms, was 117.7; ResNet-18
    pinned 22.5 vs 22.4, was 25.3; the padded MLP 5.6 vs 5.8, was 6.4)."""
    from traceadvisor.replay import replayer

    t, res = analysed(name)
    steps = int(res.summary(0).steps["analysed"].sum())
    replayed = replayer(t).window_ns / steps / 1e6
    assert replayed == pytest.approx(FACTS[name]["measured"]["base_ms"], rel=0.05)


def test_a_fusing_compiler_saving_is_the_leading_finding(analysed):
    """The GPU-bound RMSNorm + SwiGLU stack: FUS001 is the finding with the largest predicted saving (its share
    against the measured torch.compile saving is checked with the other pairs)."""
    _, res = analysed("h200_ho_norm_mlp_eager.pt.trace.json.gz")
    major = sorted((f for f in res.findings if not f.minor), key=lambda f: -(f.share or 0.0))
    assert major and major[0].rule == "FUS001", [(f.rule, f.share) for f in major]


def test_a_gpu_bound_graph_saving_is_the_kernels_dispatch_gaps_and_minor(analysed):
    """ResNet-50 inference is GPU-bound (9.4 ms per step, nothing host-bound): one CUDA graph still saves the
    GPU's gaps between separately launched kernels (measured 0.30 ms per forward, 3.4 %, facts.json
    ``graph_gap_check``), and the replay's graph predicts them (``GRAPH_NODE_GAP_NS``); the host is not the
    bottleneck, so the finding is minor and says why."""
    from traceadvisor.replay import GAPS_ONLY

    name = "h200_ho_resnet50_infer_pinned.pt.trace.json.gz"
    _, res = analysed(name)
    measured = FACTS[name]["graph_gap_check"]["saving_pct"] / 100
    graph = [f for f in res.findings if f.rule in ("IDL001", "LNC001")]
    assert graph and all(f.minor for f in graph)
    for f in graph:
        assert abs(f.share - measured) <= max(0.3 * measured, 0.01), (f.share, measured)
        assert f.evidence["profiler_overhead"]["note"] == GAPS_ONLY
