#!/usr/bin/env bash
# Batch 9 of the held-out-style traces (tools/gpu/heldout9.py) on the device, through heldout8_run.sh.
BATCH=9 SCEN=${SCEN:-bert_infer_tf32} exec bash "$(dirname "$0")/heldout8_run.sh"
