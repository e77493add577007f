#!/usr/bin/env bash
# Batch 10 of the held-out-style traces (tools/gpu/heldout10.py) on the device, through heldout8_run.sh.
BATCH=10 SCEN=${SCEN:-vit_multi bert_multi} exec bash "$(dirname "$0")/heldout8_run.sh"
