#!/usr/bin/env bash
# Batch 16 of the held-out-style traces (tools/gpu/heldout16.py) on the device, through heldout8_run.sh.
BATCH=16 SCEN=${SCEN:-vit_empty_cache gpt2_nocache_alloc swin_item_gpubound_again} exec bash "$(dirname "$0")/heldout8_run.sh"
