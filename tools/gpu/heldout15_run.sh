#!/usr/bin/env bash
# Batch 15 of the held-out-style traces (tools/gpu/heldout15.py) on the device, through heldout8_run.sh.
BATCH=15 SCEN=${SCEN:-swin_item_gpubound swin_item_hostbound convnext_compiled_warm} exec bash "$(dirname "$0")/heldout8_run.sh"
