#!/usr/bin/env bash
# Second batch of held-out-style traces (tools/gpu/heldout.py) on the device; packs to $OUT.
set -u
cd "$(dirname "$0")"
W=/tmp/ho2; mkdir -p $W
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
timeout 120 python3 heldout.py $W cold_small 2>&1 | grep -v -i warn | tail -5
timeout 250 python3 heldout.py $W compile_warm sync_gpubound sync_hostbound llama_time 2>&1 | grep -v -i warn | tail -30
N=$(ls -d /opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys | head -1)
H=$(ls -d /opt/nvidia/nsight-compute/*/host/linux-desktop-glibc_2_11_3-x64 | head -1)
mkdir -p /tmp/x; for f in ../../.debs/*.deb; do dpkg -x "$f" /tmp/x; done
export LD_LIBRARY_PATH=/tmp/x/usr/lib/x86_64-linux-gnu:$H${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
timeout 150 $N profile -t cuda,nvtx,osrt -s none --cpuctxsw=none --capture-range=cudaProfilerApi \
  --capture-range-end=stop --force-overwrite true -o $W/pageable python3 heldout.py $W pageable_nsys 2>&1 | tail -5
timeout 60 $N export --type sqlite --force-overwrite true -o $W/h200_ho_resnet18_pageable.nsys.sqlite $W/pageable.nsys-rep 2>&1 | tail -2
rm -f $W/pageable.nsys-rep
ls -la $W $W/parts
cd /tmp && tar czf $OUT/ho2.tgz ho2 && ls -la $OUT
