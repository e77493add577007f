#!/usr/bin/env bash
# Batch 9 of the held-out-style traces (tools/gpu/heldout9.py) on the device: one process per scenario, the results
# packed into $OUT/ho9.tgz after each one, so a run cut short still brings back the scenarios it finished.
# SCEN picks some (default: all).
set -u
cd "$(dirname "$0")"
W=/tmp/ho9; mkdir -p $W
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
SCEN=${SCEN:-bert_infer_tf32}
END=$(( $(date +%s) + ${BUDGET:-540} ))
for s in $SCEN; do
  left=$(( END - $(date +%s) ))
  [ "$left" -lt 60 ] && { echo "== skipped $s: ${left}s left"; continue; }
  timeout "$left" python3 heldout9.py $W "$s" 2>&1 | grep -v -i warn | tail -6
  (cd /tmp && tar czf "$OUT/ho9.tgz" ho9)
done
ls -la $W $W/parts "$OUT"
