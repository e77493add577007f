#!/usr/bin/env bash
# Batch 11 of the held-out-style traces (tools/gpu/heldout11.py) on the device, through heldout8_run.sh.
BATCH=11 SCEN=${SCEN:-vit_b_compiled_attn bert_train_compiled_attn} exec bash "$(dirname "$0")/heldout8_run.sh"
