#!/usr/bin/env bash
# Batch 18 of the held-out-style traces (tools/gpu/heldout18.py) on the device, through heldout8_run.sh.
BATCH=18 SCEN=${SCEN:-resnext50_nchw mobilenet_v2_nchw regnet_nchw_again densenet_nchw_again} exec bash "$(dirname "$0")/heldout8_run.sh"
