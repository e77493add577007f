#!/usr/bin/env bash
# Batch 19 of the held-out-style traces (tools/gpu/heldout19.py) on the device, through heldout8_run.sh.
BATCH=19 SCEN=${SCEN:-mobilenet_v3_large_nchw resnet18_nchw_fp32 shufflenet_v2_nchw mnasnet_nchw} exec bash "$(dirname "$0")/heldout8_run.sh"
