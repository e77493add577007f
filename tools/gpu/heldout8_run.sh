#!/usr/bin/env bash
# Batch 8 of the held-out-style traces (tools/gpu/heldout8.py) on the device: one process per scenario, the results
# packed into $OUT/ho8.tgz after each one, so a run cut short still brings back the scenarios it finished.
# SCEN picks some (default: all, the GPU-bound and host-bound training pairs first).
set -u
cd "$(dirname "$0")"
W=/tmp/ho8; mkdir -p $W
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
SCEN=${SCEN:-llama_train bert_train resnet50_train gpt2_train llama_prefill convnext_train bert_infer}
END=$(( $(date +%s) + ${BUDGET:-540} ))
for s in $SCEN; do
  left=$(( END - $(date +%s) ))
  [ "$left" -lt 60 ] && { echo "== skipped $s: ${left}s left"; continue; }
  timeout "$left" python3 heldout8.py $W "$s" 2>&1 | grep -v -i warn | tail -6
  (cd /tmp && tar czf "$OUT/ho8.tgz" ho8)
done
ls -la $W $W/parts "$OUT"
