#!/usr/bin/env bash
# Batch 12 of the held-out-style traces (tools/gpu/heldout12.py) on the device, through heldout8_run.sh.
BATCH=12 SCEN=${SCEN:-frcnn_train} exec bash "$(dirname "$0")/heldout8_run.sh"
