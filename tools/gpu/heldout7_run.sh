#!/usr/bin/env bash
# Batch 7 of the held-out-style traces (tools/gpu/heldout7.py) on the device: the fixes timed without a profiler,
# then the programs under Nsight Systems, exported to SQLite; packs to $OUT. libdw1 / libelf1 .debs in $DEBS.
# TIMES and PROGS (scenario:file name) pick some (run 10: effnet_time sync_time with their two programs; run 11:
# the host-bound MLP; run 12: the one-worker EfficientNet).
set -u
cd "$(dirname "$0")"
W=/tmp/ho7; mkdir -p $W
DEBS=${DEBS:-../../build/debs}
export PYTHONUNBUFFERED=1
TIMES=${TIMES:-effnet_time effnet_workers_time sync_time hostbound_time}
PROGS=${PROGS:-effnet_loader_nsys:h200_ho_effnet_loader0 effnet_workers_nsys:h200_ho_effnet_workers1 sync_gpubound_nsys:h200_ho_sync_gpubound hostbound_nsys:h200_ho_sync_hostbound}
timeout 240 python3 heldout7.py $W $TIMES 2>&1 | grep -v -i warn | tail -12
N=$(ls -d /opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys | head -1)
H=$(ls -d /opt/nvidia/nsight-compute/*/host/linux-desktop-glibc_2_11_3-x64 | head -1)
mkdir -p /tmp/x; for f in "$DEBS"/*.deb; do dpkg -x "$f" /tmp/x; done
export LD_LIBRARY_PATH=/tmp/x/usr/lib/x86_64-linux-gnu:$H${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for s in $PROGS; do
  IFS=: read -r scen name <<<"$s"
  timeout 150 $N profile -t cuda,nvtx,osrt -s none --cpuctxsw=none --capture-range=cudaProfilerApi \
    --capture-range-end=stop --force-overwrite true -o $W/$scen python3 heldout7.py $W $scen 2>&1 | tail -3
  timeout 60 $N export --type sqlite --force-overwrite true -o $W/$name.nsys.sqlite $W/$scen.nsys-rep 2>&1 | tail -1
  rm -f $W/$scen.nsys-rep
done
ls -la $W $W/parts
cd /tmp && tar czf $OUT/ho7.tgz ho7 && ls -la $OUT
