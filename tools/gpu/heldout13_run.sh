#!/usr/bin/env bash
# Batch 13 of the held-out-style traces (tools/gpu/heldout13.py) on the device, through heldout8_run.sh.
BATCH=13 SCEN=${SCEN:-gpt2_vocab llama_vocab bert_vocab} exec bash "$(dirname "$0")/heldout8_run.sh"
