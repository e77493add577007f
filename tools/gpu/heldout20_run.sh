#!/usr/bin/env bash
# Batch 20 of the held-out-style traces (tools/gpu/heldout20.py) on the device, through heldout8_run.sh.
BATCH=20 SCEN=${SCEN:-mobilenet_v3_small_nchw vgg11_bn_nchw resnet34_nchw wide_resnet50_nchw} exec bash "$(dirname "$0")/heldout8_run.sh"
