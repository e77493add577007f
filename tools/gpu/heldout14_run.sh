#!/usr/bin/env bash
# Batch 14 of the held-out-style traces (tools/gpu/heldout14.py) on the device, through heldout8_run.sh.
BATCH=14 SCEN=${SCEN:-distilbert_infer_graphs llama_fp32_tf32 metrics_cpu_copy bert_varlen_alloc} exec bash "$(dirname "$0")/heldout8_run.sh"
