#!/usr/bin/env bash
# Held-out-style traces, batch 2 (heldout2.py) on the device; packs $W to $OUT in 15 MB parts.
# Made fixtures/h200_heldout batch 2: run 1 default, run 2: S1="vitb_warm t5_train cpu_preproc" T2=200.
set -u
cd "$(dirname "$0")"
W=/tmp/ho3; mkdir -p $W
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
python3 -c "import torch, transformers, timm; print(torch.__version__, transformers.__version__, timm.__version__)"
timeout 370 python3 heldout2.py $W ${S1:-vit_warm vitb_warm bart_sdpa t5_train optim_fused mlm_mask vit_tolist grad_accum cpu_preproc empty_cache} 2>&1 | grep -v -i warn | tail -60
timeout ${T2:-170} python3 heldout2.py $W ${S2:-gpt2_generate} 2>&1 | grep -v -i warn | tail -20
ls -la $W $W/parts
cd /tmp && tar cf - ho3 | split -b 15M - $OUT/ho3.tar. && ls -la $OUT
