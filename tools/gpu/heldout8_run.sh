#!/usr/bin/env bash
# Batches 8-10 of the held-out-style traces (tools/gpu/heldoutN.py, BATCH=8 by default) on the device: one process
# per scenario, the results packed into $OUT/hoN.tgz after each one, so a run cut short still brings back the
# scenarios it finished. SCEN picks some (default: all of batch 8, the GPU-bound and host-bound training pairs
# first); heldout9_run.sh and heldout10_run.sh run this with their batch.
set -u
cd "$(dirname "$0")"
B=${BATCH:-8}
W=/tmp/ho$B; mkdir -p "$W"
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
SCEN=${SCEN:-llama_train bert_train resnet50_train gpt2_train llama_prefill convnext_train bert_infer}
END=$(( $(date +%s) + ${BUDGET:-540} ))
for s in $SCEN; do
  left=$(( END - $(date +%s) ))
  [ "$left" -lt 60 ] && { echo "== skipped $s: ${left}s left"; continue; }
  timeout "$left" python3 "heldout$B.py" "$W" "$s" 2>&1 | grep -v -i warn | tail -6
  (cd /tmp && tar czf "$OUT/ho$B.tgz" "ho$B")
done
ls -la "$W" "$W/parts" "$OUT"
