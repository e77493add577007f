#!/usr/bin/env bash
# Batch 10 of the held-out-style traces (tools/gpu/heldout10.py) on the device: one process per scenario, the results
# packed into $OUT/ho10.tgz after each one, so a run cut short still brings back the scenarios it finished.
# SCEN picks some (default: all).
set -u
cd "$(dirname "$0")"
W=/tmp/ho10; mkdir -p $W
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
SCEN=${SCEN:-vit_multi bert_multi}
END=$(( $(date +%s) + ${BUDGET:-540} ))
for s in $SCEN; do
  left=$(( END - $(date +%s) ))
  [ "$left" -lt 60 ] && { echo "== skipped $s: ${left}s left"; continue; }
  timeout "$left" python3 heldout10.py $W "$s" 2>&1 | grep -v -i warn | tail -6
  (cd /tmp && tar czf "$OUT/ho10.tgz" ho10)
done
ls -la $W $W/parts "$OUT"
