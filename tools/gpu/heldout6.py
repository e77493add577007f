"""Held-out-style traces, batch 6 (fixtures/h200_heldout, facts.json): model families no rule was developed on and
no earlier batch used (Whisper, Mistral, Swin, an LSTM language model, a DLRM-style embedding model, a DeepLabV3
segmentation model, DistilBERT with a tokenizing DataLoader, a GradScaler fp16 ResNet-50). Most are healthy,
warmed programs, checked for false alarms ("a warmed-up run shows no warm-up; a host waiting on a busy GPU is
not a bottleneck"); two have a planted fix timed without the profiler. Same conventions as heldout.py-heldout5.py:
random init, base and fixed interleaved in one process, blocks of steps with one synchronize, median of rounds.

    python3 heldout6.py OUTDIR [scenario ...]
"""

from __future__ import annotations

import contextlib
import statistics
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path.cwd() / "tools" / "gpu")]

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from heldout import DEV, block_ms, record, run_all, sync, timed_pair, trainer  # noqa: E402
from heldout2 import prof  # noqa: E402

HEALTHY = ["WRM001", "MEM001", "MEM002", "DLD001", "SYN001"]


def _healthy(out: Path, key: str, what: str, step, n: int = 10, extra_absent: tuple[str, ...] = ()) -> None:
    t = timed_pair(step, None, n=n, rounds=3)
    p = prof(step, out, f"h200_ho_{key}", active=3)
    record(out, key, {"what": what, **p, "measured": t, "expect": [], "absent": HEALTHY + list(extra_absent)})


def _whisper():
    """Whisper (4 encoder + 4 decoder layers, d=384) for training, its input features and labels (batch 16)."""
    from transformers import WhisperConfig, WhisperForConditionalGeneration

    torch.manual_seed(0)
    cfg = WhisperConfig(
        d_model=384, encoder_layers=4, decoder_layers=4, encoder_attention_heads=6, decoder_attention_heads=6,
        encoder_ffn_dim=1536, decoder_ffn_dim=1536, num_mel_bins=80,
    )  # fmt: skip
    m = WhisperForConditionalGeneration(cfg).to(DEV).train()
    feats = torch.randn(16, 80, 3000, device=DEV)
    labels = torch.randint(0, cfg.vocab_size, (16, 96), device=DEV)
    return m, feats, labels


def _mistral_forward():
    """Mistral (8 layers, d=1024, GQA 16/4 heads) bf16: the no_grad forward of batch 8 x 1024 tokens, no cache."""
    from transformers import MistralConfig, MistralForCausalLM

    torch.manual_seed(0)
    cfg = MistralConfig(
        hidden_size=1024, intermediate_size=3584, num_hidden_layers=8, num_attention_heads=16,
        num_key_value_heads=4, vocab_size=32000, max_position_embeddings=4096, sliding_window=4096,
    )  # fmt: skip
    m = MistralForCausalLM(cfg).to(DEV, dtype=torch.bfloat16).eval()
    ids = torch.randint(0, 32000, (8, 1024), device=DEV)

    def fwd() -> None:
        with torch.no_grad():
            m(input_ids=ids, use_cache=False)

    return fwd


def _gptneox():
    """GPT-NeoX (6 layers, d=768) for training and its batch (16 x 512 tokens)."""
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    torch.manual_seed(0)
    cfg = GPTNeoXConfig(
        hidden_size=768, intermediate_size=3072, num_hidden_layers=6, num_attention_heads=12, vocab_size=50304,
        max_position_embeddings=1024,
    )  # fmt: skip
    return GPTNeoXForCausalLM(cfg).to(DEV).train(), torch.randint(0, 50304, (16, 512), device=DEV)


def whisper_train(out: Path) -> None:
    """Whisper (4+4 layers, d=384) seq2seq training on log-mel features, bf16 autocast, fused AdamW, warm."""
    m, feats, labels = _whisper()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4, fused=True)
    step = trainer(opt, lambda i: m(input_features=feats, labels=labels).loss)
    _healthy(out, "whisper_train", "transformers Whisper (4 encoder + 4 decoder layers, d=384) training, bf16 "
             "autocast, batch 16 x 80 x 3000 log-mel frames, 96 label tokens, fused AdamW, data on the GPU, warm; "
             "schedule 1/1/3", step)  # fmt: skip


def mistral_prefill(out: Path) -> None:
    """Mistral (8 layers, d=1024, GQA 16/4 heads) bf16 inference, batch 8 x 1024-token prefill, no_grad."""
    fwd = _mistral_forward()
    _healthy(out, "mistral_prefill", "transformers Mistral (8 layers, d=1024, 16 query / 4 KV heads) bf16 weights, "
             "inference (no_grad) of batch 8 x 1024-token prompts, no cache, warm; schedule 1/1/3",
             lambda i: fwd())  # fmt: skip


def swin_train(out: Path) -> None:
    """timm swin_tiny training, bf16 autocast, channels_last input, fused AdamW, batch 64, warm."""
    import timm

    torch.manual_seed(0)
    m = timm.create_model("swin_tiny_patch4_window7_224", pretrained=False).to(DEV).train()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4, fused=True)
    x = torch.randn(64, 3, 224, 224, device=DEV)
    y = torch.randint(0, 1000, (64,), device=DEV)
    step = trainer(opt, lambda i: F.cross_entropy(m(x), y))
    _healthy(out, "swin_t_train", "timm swin_tiny_patch4_window7_224 training, bf16 autocast, batch 64, fused "
             "AdamW, data on the GPU, warm; schedule 1/1/3", step)  # fmt: skip


class _LstmLM(torch.nn.Module):
    def __init__(self, vocab: int = 32000, d: int = 1024) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, d)
        self.rnn = torch.nn.LSTM(d, d, num_layers=2, batch_first=True)
        self.out = torch.nn.Linear(d, vocab)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h, _ = self.rnn(self.emb(ids))
        return self.out(h)


def lstm_lm(out: Path) -> None:
    """A 2-layer LSTM language model (cuDNN RNN) training, bf16 autocast, batch 64 x 256 tokens, fused AdamW."""
    torch.manual_seed(0)
    m = _LstmLM().to(DEV).train()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4, fused=True)
    ids = torch.randint(0, 32000, (64, 257), device=DEV)
    step = trainer(opt, lambda i: F.cross_entropy(m(ids[:, :-1]).flatten(0, 1), ids[:, 1:].flatten()))
    _healthy(out, "lstm_lm_train", "Embedding(32000, 1024) + 2-layer nn.LSTM(1024) + Linear language model "
             "training (cuDNN RNN), bf16 autocast, batch 64 x 256 tokens, fused AdamW, data on the GPU, warm; "
             "schedule 1/1/3", step)  # fmt: skip


class _Dlrm(torch.nn.Module):
    def __init__(self, tables: int = 8, rows: int = 500_000, d: int = 128) -> None:
        super().__init__()
        self.bags = torch.nn.ModuleList(torch.nn.EmbeddingBag(rows, d, mode="sum") for _ in range(tables))
        self.bottom = torch.nn.Sequential(torch.nn.Linear(13, 256), torch.nn.ReLU(), torch.nn.Linear(256, d))
        self.top = torch.nn.Sequential(
            torch.nn.Linear(d * (tables + 1), 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 512), torch.nn.ReLU(),
            torch.nn.Linear(512, 1),
        )  # fmt: skip

    def forward(self, dense: torch.Tensor, idx: list[torch.Tensor], offs: torch.Tensor) -> torch.Tensor:
        z = [self.bottom(dense)] + [b(i, offs) for b, i in zip(self.bags, idx, strict=True)]
        return self.top(torch.cat(z, 1)).squeeze(1)


def dlrm_train(out: Path) -> None:
    """A DLRM-style click model: 8 EmbeddingBag tables (500k x 128, 20 ids per bag), MLPs, batch 8192, SGD."""
    torch.manual_seed(0)
    m = _Dlrm().to(DEV).train()
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    B, L = 8192, 20
    dense = torch.randn(B, 13, device=DEV)
    idx = [torch.randint(0, 500_000, (B * L,), device=DEV) for _ in range(8)]
    offs = torch.arange(0, B * L, L, device=DEV)
    y = torch.randint(0, 2, (B,), device=DEV).float()

    def step(i: int) -> None:
        loss = F.binary_cross_entropy_with_logits(m(dense, idx, offs), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    _healthy(out, "dlrm_train", "DLRM-style model: 8 EmbeddingBag(500k, 128, sum) tables of 20 ids per bag, bottom "
             "and top MLPs, FP32, batch 8192, SGD (foreach), data on the GPU, warm; schedule 1/1/3", step,
             extra_absent=("OPT001",))  # fmt: skip


def deeplab_pageable(out: Path) -> None:
    """torchvision DeepLabV3-MobileNetV3 segmentation training, batch 32 x 512 x 512 images and int64 masks copied
    from pageable memory each step; fix: pinned buffers + non_blocking."""
    import torchvision

    torch.manual_seed(0)
    m = torchvision.models.segmentation.deeplabv3_mobilenet_v3_large(
        weights=None, weights_backbone=None, num_classes=21
    ).to(DEV).train()  # fmt: skip
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4, fused=True)
    xs = [torch.randn(32, 3, 512, 512) for _ in range(2)]
    ys = [torch.randint(0, 21, (32, 512, 512)) for _ in range(2)]
    xp = [x.pin_memory() for x in xs]
    yp = [y.pin_memory() for y in ys]

    def make(pinned: bool):
        X, Y = (xp, yp) if pinned else (xs, ys)

        def loss(i: int) -> torch.Tensor:
            x = X[i % 2].to(DEV, non_blocking=pinned)
            return F.cross_entropy(m(x)["out"], Y[i % 2].to(DEV, non_blocking=pinned))

        return trainer(opt, loss)

    base, fixed = make(False), make(True)
    t = timed_pair(base, fixed, n=10, rounds=5)
    p = prof(base, out, "h200_ho_deeplab_pageable", active=3)
    pf = prof(fixed, out, "h200_ho_deeplab_pinned", active=3)
    record(out, "deeplab_pageable", {
        "what": "torchvision deeplabv3_mobilenet_v3_large training, bf16 autocast, batch 32 x 3 x 512 x 512 images "
                "(101 MB) and int64 masks (67 MB) copied from pageable host memory each step; fix: pinned buffers "
                "+ non_blocking", **p, "fixed_trace": pf["trace"], "measured": t, "expect": ["MEM001"],
        "absent": ["WRM001", "DLD001"], "fix_rule": "MEM001"})  # fmt: skip


class _Texts(torch.utils.data.Dataset):
    """Synthetic sentences tokenized in __getitem__ by a pure-Python hashing tokenizer (the CPU work)."""

    WORDS = [f"w{i}" for i in range(5000)]

    def __len__(self) -> int:
        return 1 << 20

    def __getitem__(self, i: int):
        import random

        r = random.Random(i)
        text = " ".join(r.choice(self.WORDS) for _ in range(300))
        ids = [101] + [(hash(w) % 29000) + 1000 for w in text.lower().split()][:254] + [102]
        ids += [0] * (256 - len(ids))
        return torch.tensor(ids), r.randrange(2)


def distilbert_loader(out: Path) -> None:
    """DistilBERT-style (6 layers) classifier; the DataLoader tokenizes in the main process (num_workers=0);
    fix: 6 workers, pin_memory."""
    from transformers import DistilBertConfig, DistilBertForSequenceClassification

    torch.manual_seed(0)
    m = DistilBertForSequenceClassification(DistilBertConfig(num_labels=2)).to(DEV).train()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4, fused=True)

    def make(workers: int):
        dl = torch.utils.data.DataLoader(
            _Texts(), batch_size=64, num_workers=workers, pin_memory=workers > 0, shuffle=False,
            persistent_workers=workers > 0, prefetch_factor=4 if workers else None,
        )  # fmt: skip
        it = iter(dl)

        def loss(i: int) -> torch.Tensor:
            ids, y = next(it)
            ids, y = ids.to(DEV, non_blocking=True), y.to(DEV, non_blocking=True)
            return m(input_ids=ids, attention_mask=ids.ne(0), labels=y).loss

        return trainer(opt, loss)

    base, fixed = make(0), make(6)
    t = timed_pair(base, fixed, n=10, rounds=5)
    p = prof(base, out, "h200_ho_distilbert_loader0", active=3)
    record(out, "distilbert_loader0", {
        "what": "transformers DistilBERT (6 layers) sequence classification training, bf16 autocast, batch 64 x 256 "
                "tokens, fused AdamW; the DataLoader tokenizes 300-word synthetic texts in Python in the main "
                "process (num_workers=0); fix: 6 workers + pin_memory", **p, "measured": t,
        "expect": ["DLD001"], "absent": ["WRM001", "MEM001"], "fix_rule": "DLD001"})  # fmt: skip


def _resnet50_fp16_steps():
    """ResNet-50 fp16 autocast training (SGD momentum, batch 192, channels_last, data on the GPU): ``make(scaler)``
    is its step under that GradScaler, one model for every scaler."""
    import torchvision

    torch.manual_seed(0)
    m = torchvision.models.resnet50(weights=None).to(DEV).to(memory_format=torch.channels_last).train()
    opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(192, 3, 224, 224, device=DEV).contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (192,), device=DEV)

    def make(scaler):
        def step(i: int) -> None:
            with torch.autocast("cuda", dtype=torch.float16):
                loss = F.cross_entropy(m(x), y)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            opt.zero_grad(set_to_none=True)

        return step

    return make


def resnet50_gradscaler(out: Path) -> None:
    """GPU-bound ResNet-50 fp16 autocast training with torch.amp.GradScaler: scaler.step reads found_inf on the
    host every step (a sync with a busy GPU behind it, which must not be a bottleneck); fix: none."""
    step = _resnet50_fp16_steps()(torch.amp.GradScaler("cuda"))
    _healthy(out, "resnet50_gradscaler", "torchvision ResNet-50 training, fp16 autocast with torch.amp.GradScaler "
             "(scaler.step syncs on found_inf every step), channels_last, batch 192, SGD momentum, data on the "
             "GPU, warm (GPU-bound); schedule 1/1/3", step)  # fmt: skip


def gptneox_compiled_warm(out: Path) -> None:
    """GPT-NeoX (6 layers, d=768) training under torch.compile (default), compiled and warmed before the window."""
    m, ids = _gptneox()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4, fused=True)
    cm = torch.compile(m)
    step = trainer(opt, lambda i: cm(input_ids=ids, labels=ids).loss)
    for i in range(3):
        step(i)
    sync()
    _healthy(out, "gptneox_compiled_warm", "transformers GPT-NeoX (6 layers, d=768) training under torch.compile "
             "(default), bf16 autocast, batch 16 x 512, fused AdamW, compiled and warmed before the profiler; "
             "schedule 1/1/3", step)  # fmt: skip


ALL = [
    whisper_train,
    mistral_prefill,
    swin_train,
    lstm_lm,
    dlrm_train,
    deeplab_pageable,
    distilbert_loader,
    resnet50_gradscaler,
    gptneox_compiled_warm,
]


# --- run 2: the fixes of run 1's findings that needed a measurement, each timed as a pair in one process ------
def _pair(out: Path, key: str, what: str, base, fixed, n: int = 10, rounds: int = 5, trace=None) -> None:
    """A timed pair; with ``trace``, the base is also profiled in the same process (``trace()`` -> prof's dict)."""
    t = timed_pair(base, fixed, n=n, rounds=rounds)
    record(out, key, {"what": what, **(trace() if trace else {}), "measured": t})


def _dlrm_step(fused: bool, momentum: float = 0.0):
    torch.manual_seed(0)
    m = _Dlrm().to(DEV).train()
    opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=momentum, fused=fused)
    B, L = 8192, 20
    g = torch.Generator(device=DEV).manual_seed(1)
    dense = torch.randn(B, 13, device=DEV, generator=g)
    idx = [torch.randint(0, 500_000, (B * L,), device=DEV, generator=g) for _ in range(8)]
    offs = torch.arange(0, B * L, L, device=DEV)
    y = torch.randint(0, 2, (B,), device=DEV, generator=g).float()

    def step(i: int) -> None:
        F.binary_cross_entropy_with_logits(m(dense, idx, offs), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def dlrm_momentum(out: Path) -> None:
    """dlrm_train with SGD momentum 0.9: foreach (base, profiled) vs fused=True (fixed)."""
    base, fixed = _dlrm_step(False, 0.9), _dlrm_step(True, 0.9)
    t = timed_pair(base, fixed, n=20, rounds=5)
    p = prof(base, out, "h200_ho_dlrm_momentum", active=3)
    record(out, "dlrm_momentum", {
        "what": "dlrm_train with SGD momentum 0.9 (foreach: a momentum buffer per parameter, 2 GB of tables); "
                "fix: SGD fused=True", **p, "measured": t, "expect": ["OPT001"], "absent": HEALTHY,
        "fix_rule": "OPT001"})  # fmt: skip


def dlrm_fused_sgd(out: Path) -> None:
    """dlrm_train's SGD: foreach (the trace) vs fused=True, two models of the same init in one process."""
    _pair(out, "dlrm_fused_sgd", "dlrm_train: SGD foreach (base) vs SGD fused=True (fixed)", _dlrm_step(False),
          _dlrm_step(True))  # fmt: skip


class _NoSyncScaler(torch.amp.GradScaler):
    """GradScaler whose step skips the host read of found_inf (the optimizer always steps: no inf occurs here),
    so the GPU work is the same as the base's and only the sync is gone."""

    def _maybe_opt_step(self, optimizer, optimizer_state, *args, **kwargs):
        return optimizer.step(*args, **kwargs)


def gradscaler_nosync(out: Path) -> None:
    """resnet50_gradscaler: GradScaler (base, syncs on found_inf) vs the same without the host read (fixed)."""
    make = _resnet50_fp16_steps()
    _pair(out, "gradscaler_nosync", "resnet50_gradscaler: torch.amp.GradScaler (base) vs a GradScaler whose step "
          "does not read found_inf on the host (fixed: same kernels, no sync)", make(torch.amp.GradScaler("cuda")),
          make(_NoSyncScaler("cuda")))  # fmt: skip


def _swin_attn_pair(out: Path, key: str, what: str, n: int, rounds: int) -> None:
    """swin_t_train's program with timm's WindowAttention eager (fused_attn=False, the default: base) vs
    fused_attn=True (F.scaled_dot_product_attention: fixed), one model toggled between steps."""
    import timm

    torch.manual_seed(0)
    m = timm.create_model("swin_tiny_patch4_window7_224", pretrained=False).to(DEV).train()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4, fused=True)
    x = torch.randn(64, 3, 224, 224, device=DEV)
    y = torch.randint(0, 1000, (64,), device=DEV)
    flags = [mod for mod in m.modules() if hasattr(mod, "fused_attn")]
    print("swin fused_attn before:", sorted({bool(mod.fused_attn) for mod in flags}), len(flags), flush=True)
    train = trainer(opt, lambda i: F.cross_entropy(m(x), y))

    def make(on: bool):
        def step(i: int) -> None:
            for mod in flags:
                mod.fused_attn = on
            train(i)

        return step

    _pair(out, key, what, make(False), make(True), n=n, rounds=rounds)


def swin_fused_attn(out: Path) -> None:
    """Run 2: 5 rounds of 10 steps."""
    _swin_attn_pair(out, "swin_fused_attn", "swin_t_train: timm WindowAttention eager (fused_attn=False, the "
                    "default, base) vs fused_attn=True (fixed)", n=10, rounds=5)  # fmt: skip


def swin_fused_attn2(out: Path) -> None:
    """Run 3: 20-step blocks, 7 rounds (run 2's 5 rounds of 10 drifted from 38 to 69 ms)."""
    _swin_attn_pair(out, "swin_fused_attn2", "swin_t_train: eager window attention (base) vs fused_attn=True "
                    "(fixed), 7 rounds of 20 steps", n=20, rounds=7)  # fmt: skip


@contextlib.contextmanager
def _capture_keeps_sdpa_causal():
    """transformers counts CUDA stream capture as tracing (``is_tracing``), and while tracing its mask builders
    never skip the mask: a forward captured in a graph builds an explicit 4-D causal mask, SDPA gets ``attn_mask``
    instead of ``is_causal`` and GQA's K/V are expanded (cuDNN's flash kernel 2.6x slower on the H200 for Mistral,
    plus the copies). While this is entered the mask code does not count capture as tracing, and the packed-sequence
    check (a host read of ``position_ids``, which capture forbids) answers "not packed", as it does in eager mode for
    these inputs: the graph then holds the eager forward's GPU work."""
    from transformers import masking_utils

    saved = masking_utils.is_tracing, masking_utils.find_packed_sequence_indices
    masking_utils.is_tracing = lambda tensor=None: False
    masking_utils.find_packed_sequence_indices = lambda position_ids: None
    try:
        yield
    finally:
        masking_utils.is_tracing, masking_utils.find_packed_sequence_indices = saved


def _graphed(fn, warm: int = 3, keep_causal: bool = False):
    """``fn()`` captured in one CUDA graph after ``warm`` eager calls on a side stream; returns the replay.
    ``keep_causal``: captured under :func:`_capture_keeps_sdpa_causal`."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(warm):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with _capture_keeps_sdpa_causal() if keep_causal else contextlib.nullcontext(), torch.cuda.graph(g):
        fn()
    return g.replay


def _three_way(base, shipped, causal, n: int = 10, rounds: int = 5, warm: int = 5) -> dict:
    """Interleaved blocks of the eager base, the graph as transformers captures it and the graph that keeps
    SDPA's ``is_causal``: medians of ``rounds`` blocks of ``n`` calls each."""
    fns = {"base": base, "fixed_shipped": shipped, "fixed": causal}
    fns = {k: f for k, f in fns.items() if f is not None}
    for f in fns.values():
        for i in range(warm):
            f(i)
    sync()
    rounds_ms: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(rounds):
        for k, f in fns.items():
            rounds_ms[k].append(block_ms(f, n))
    out = {f"{k}_ms": statistics.median(v) for k, v in rounds_ms.items()}
    out |= {f"{k}_rounds_ms": v for k, v in rounds_ms.items()}
    for k in ("fixed", "fixed_shipped")[: len(fns) - 1]:
        out[f"{k.replace('fixed', 'saving')}_pct"] = (
            100.0 * (out["base_ms"] - out[f"{k}_ms"]) / out["base_ms"]
        )
    return out


def mistral_graph_causal(out: Path) -> None:
    """mistral_graph again, the graph also captured with SDPA's is_causal kept (the eager forward's GPU work)."""
    fwd = _mistral_forward()
    shipped, causal = _graphed(fwd), _graphed(fwd, keep_causal=True)
    with torch.no_grad():
        fwd()
    record(out, "mistral_graph_causal", {"what": "mistral_prefill: eager forward (base) vs one CUDA graph as "
           "transformers captures it (fixed_shipped: explicit causal mask) vs one CUDA graph with SDPA's is_causal "
           "kept (fixed)", "measured": _three_way(lambda i: fwd(), lambda i: shipped(), lambda i: causal())})  # fmt: skip


def whisper_graph_causal(out: Path) -> None:
    """whisper_graph again, the step also captured with the decoder's SDPA is_causal kept."""
    body = _whisper_graph_body()
    for _ in range(3):
        body()
    sync()
    causal = _graphed(body, warm=2, keep_causal=True)  # one graph per process: a second capture trips the RNG
    record(out, "whisper_graph_causal", {"what": "whisper_train's graph-ready step: eager (base) vs one CUDA graph "
           "with SDPA's is_causal kept (fixed); the graph as shipped is whisper_graph",
           "measured": _three_way(lambda i: body(), None, lambda i: causal())})  # fmt: skip


def mistral_graph(out: Path) -> None:
    """mistral_prefill: eager forward (base) vs the same forward captured in one CUDA graph (fixed)."""
    fwd = _mistral_forward()
    replay = _graphed(fwd)
    _pair(out, "mistral_graph", "mistral_prefill: eager forward (base) vs one CUDA graph of it (fixed)",
          lambda i: fwd(), lambda i: replay(), trace=lambda: prof(lambda i: fwd(), out, "h200_ho_mistral_graphable",
          active=3))  # fmt: skip


def _graph_step_pair(out: Path, key: str, what: str, body) -> None:
    """``body()`` (a whole training step that zeroes its grads in place and steps a capturable optimizer) eager
    (base, also profiled in this process as ``h200_ho_<model>_graphable``) vs captured in one CUDA graph (fixed)."""

    def eager(i: int) -> None:
        body()

    for i in range(3):
        eager(i)
    sync()
    replay = _graphed(body, warm=2)
    trace = f"h200_ho_{key.removesuffix('_graph')}_graphable"
    _pair(out, key, what, eager, lambda i: replay(), trace=lambda: prof(eager, out, trace, active=3))


def lstm_graph(out: Path) -> None:
    """lstm_lm_train: the eager step (base) vs the whole step (capturable fused AdamW) in one CUDA graph."""
    torch.manual_seed(0)
    m = _LstmLM().to(DEV).train()
    ids = torch.randint(0, 32000, (64, 257), device=DEV)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4, fused=True, capturable=True)

    def body() -> None:
        opt.zero_grad(set_to_none=False)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(m(ids[:, :-1]).flatten(0, 1), ids[:, 1:].flatten())
        loss.backward()
        opt.step()

    _graph_step_pair(out, "lstm_graph", "lstm_lm_train: eager step (base: grads zeroed in place, capturable fused "
                     "AdamW) vs the same step captured in one CUDA graph (fixed)", body)  # fmt: skip


def _whisper_graph_body():
    """whisper_train's step made graph-ready: grads zeroed in place, capturable fused AdamW."""
    m, feats, labels = _whisper()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4, fused=True, capturable=True)

    def body() -> None:
        opt.zero_grad(set_to_none=False)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = m(input_features=feats, labels=labels).loss
        loss.backward()
        opt.step()

    return body


def whisper_graph(out: Path) -> None:
    """whisper_train: the eager step (base) vs the whole step (capturable fused AdamW) in one CUDA graph."""
    _graph_step_pair(out, "whisper_graph", "whisper_train: eager step (base: grads zeroed in place, capturable fused "
                     "AdamW) vs the same step captured in one CUDA graph (fixed)", _whisper_graph_body())  # fmt: skip


def gptneox_compiled_step(mode: str | None, warm: int = 4):
    """gptneox_compiled_warm's training step under ``torch.compile(mode=mode)`` (fused AdamW eager), warmed up."""
    m, ids = _gptneox()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4, fused=True)
    cm = torch.compile(m, mode=mode)

    def step(i: int = 0) -> None:
        torch.compiler.cudagraph_mark_step_begin()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = cm(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for i in range(warm):
        step(i)
    sync()
    return step


def gptneox_compiled_graphs(out: Path) -> None:
    """gptneox_compiled_warm's program: torch.compile default (base, profiled here too) vs
    mode='reduce-overhead' (the compiled graphs in CUDA graphs; fused AdamW stays eager)."""

    base, fixed = gptneox_compiled_step(None), gptneox_compiled_step("reduce-overhead")
    _pair(out, "gptneox_compiled_graphs", "gptneox_compiled_warm's program: torch.compile default (base) vs "
          "mode='reduce-overhead' (fixed)", base, fixed, trace=lambda: prof(base, out,
          "h200_ho_gptneox_compiled_base", active=3))  # fmt: skip


FIXES = [
    mistral_graph_causal,
    whisper_graph_causal,
    gptneox_compiled_graphs,
    dlrm_momentum,
    swin_fused_attn2,
    dlrm_fused_sgd,
    gradscaler_nosync,
    swin_fused_attn,
    mistral_graph,
    lstm_graph,
    whisper_graph,
]


# --- run 5: more healthy programs (false-alarm checks) -------------------------------------------------------
def effnet_infer(out: Path) -> None:
    """timm efficientnet_b0 inference, bf16 weights, channels_last, batch 256, inference_mode, warm."""
    import timm

    torch.manual_seed(0)
    m = timm.create_model("efficientnet_b0", pretrained=False).to(DEV, dtype=torch.bfloat16).eval()
    m = m.to(memory_format=torch.channels_last)
    x = torch.randn(256, 3, 224, 224, device=DEV, dtype=torch.bfloat16).contiguous(
        memory_format=torch.channels_last
    )

    def step(i: int) -> None:
        with torch.inference_mode():
            m(x)

    _healthy(out, "effnet_b0_infer", "timm efficientnet_b0 inference, bf16 weights, channels_last, batch 256, "
             "inference_mode, data on the GPU, warm; schedule 1/1/3", step)  # fmt: skip


def bert_checkpointing(out: Path) -> None:
    """transformers BERT-base (12 layers) MLM training with gradient checkpointing, bf16 autocast, fused AdamW."""
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(0)
    m = BertForMaskedLM(BertConfig()).to(DEV).train()
    m.gradient_checkpointing_enable()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4, fused=True)
    ids = torch.randint(0, 30522, (32, 256), device=DEV)
    step = trainer(opt, lambda i: m(input_ids=ids, labels=ids).loss)
    _healthy(out, "bert_base_ckpt", "transformers BERT-base (12 layers) masked-LM training with gradient "
             "checkpointing, bf16 autocast, batch 32 x 256, fused AdamW, data on the GPU, warm; schedule 1/1/3",
             step)  # fmt: skip


def convnext_warm(out: Path) -> None:
    """timm convnext_tiny training, cudnn.benchmark, warmed before the window (the cold ConvNeXt's healthy twin)."""
    import timm

    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    m = (
        timm.create_model("convnext_tiny", pretrained=False)
        .to(DEV)
        .to(memory_format=torch.channels_last)
        .train()
    )
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4, fused=True)
    x = torch.randn(64, 3, 224, 224, device=DEV).contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (64,), device=DEV)
    step = trainer(opt, lambda i: F.cross_entropy(m(x), y))
    try:
        _healthy(out, "convnext_t_warm", "timm convnext_tiny training, cudnn.benchmark=True, bf16 autocast, "
                 "channels_last, batch 64, fused AdamW, data on the GPU, warmed (the benchmark's search done) "
                 "before the profiler; schedule 1/1/3", step)  # fmt: skip
    finally:
        torch.backends.cudnn.benchmark = False


def resnet50_infer_pinned(out: Path) -> None:
    """torchvision ResNet-50 inference bf16, each batch copied from pinned memory with non_blocking (healthy)."""
    import torchvision

    torch.manual_seed(0)
    m = torchvision.models.resnet50(weights=None).to(DEV, dtype=torch.bfloat16).eval()
    m = m.to(memory_format=torch.channels_last)
    xs = [torch.randn(128, 3, 224, 224, dtype=torch.bfloat16).pin_memory() for _ in range(2)]

    def step(i: int) -> None:
        with torch.inference_mode():
            x = xs[i % 2].to(DEV, non_blocking=True).contiguous(memory_format=torch.channels_last)
            m(x)

    _healthy(out, "resnet50_infer_pinned", "torchvision ResNet-50 inference, bf16, channels_last, batch 128 copied "
             "from pinned host memory with non_blocking each step (38 MB), inference_mode, warm; schedule 1/1/3",
             step)  # fmt: skip


def vit_b_compiled_infer(out: Path) -> None:
    """timm ViT-B/16 inference under torch.compile (default), bf16, batch 128, compiled before the window."""
    import timm

    torch.manual_seed(0)
    m = timm.create_model("vit_base_patch16_224", pretrained=False).to(DEV, dtype=torch.bfloat16).eval()
    cm = torch.compile(m)
    x = torch.randn(128, 3, 224, 224, device=DEV, dtype=torch.bfloat16)

    def step(i: int) -> None:
        with torch.inference_mode():
            cm(x)

    for i in range(3):
        step(i)
    sync()
    _healthy(out, "vit_b_compiled_infer", "timm vit_base_patch16_224 inference under torch.compile (default), bf16 "
             "weights, batch 128, inference_mode, compiled and warmed before the profiler; schedule 1/1/3",
             step)  # fmt: skip


HEALTHY_MORE = [effnet_infer, bert_checkpointing, convnext_warm, resnet50_infer_pinned, vit_b_compiled_infer]


if __name__ == "__main__":
    run_all(ALL + FIXES + HEALTHY_MORE if sys.argv[2:] else ALL, sys.argv)
