#!/usr/bin/env bash
# Batch 17 of the held-out-style traces (tools/gpu/heldout17.py) on the device, through heldout8_run.sh.
BATCH=17 SCEN=${SCEN:-resnet50_nchw densenet_nchw regnet_nchw resnet50_nchw_fp32} exec bash "$(dirname "$0")/heldout8_run.sh"
