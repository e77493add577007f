#!/usr/bin/env bash
# Run the GPU trace generators on the device machine and pack what they wrote for the trip back.
#
#   bash tools/gpu/run_device.sh STAGE...      (from anywhere in a traceadvisor checkout or a copy of tools/gpu)
#
# Stages: calib (issue 12 pairs but compile), nsys_calib (pinned and item baselines under nsys), compile
# (the torch.compile pair), bf16_gpubound and bf16_gpt2 (the extra bf16 pairs), repeat (item and pinned
# again, to see the noise), models (issue 13 torch traces), nsys_models (issue 13 nsys exports; NSYS_ONLY picks
# some), profile_nsys (`traceadvisor profile --profiler nsys` end to end on tools/gpu/profile_train.py:
# traceadvisor's own dependencies come from $SITE, a .tar.zst of an unpacked site folder, when the device
# lacks them).
# Files go to $GPU_WORK (default
# /tmp/gpuwork)/{calibration,h200_models,repeat}; at the end each folder is packed as $OUT/<folder>.tgz (split into
# 15 MiB parts when larger), with the log. A stage gets what is left of $GPU_BUDGET seconds (default 540),
# so the packing always runs. Nsight Systems: the CLI inside Nsight Compute's folder, with libdw1/libelf1
# unpacked from the .deb files in $DEBS (apt-get download libdw1 libelf1); checked on a tiny program first.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
OUTD=${OUT:-/tmp/gpu_out}
W=${GPU_WORK:-/tmp/gpuwork}
DEBS=${DEBS:-$HERE/debs}
BUDGET=${GPU_BUDGET:-540}
START=$(date +%s)
mkdir -p "$W/calibration" "$W/h200_models" "$W/reports" "$W/profile" "$OUTD"
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
PY=python3
left() { echo $((BUDGET - ($(date +%s) - START) - 30)); }
say() { echo "== $(date -u +%H:%M:%S) (+$(($(date +%s) - START))s) $*"; }

NSYS=""
NSYS_LD=""
nsys_setup() {
    local hostlib
    NSYS=$(ls -d /opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys 2>/dev/null | head -1)
    hostlib=$(ls -d /opt/nvidia/nsight-compute/*/host/linux-desktop-glibc_2_11_3-x64 2>/dev/null | head -1)
    if [ -z "$NSYS" ]; then say "nsys: not found"; return 1; fi
    mkdir -p /tmp/x
    for f in "$DEBS"/*.deb; do dpkg -x "$f" /tmp/x; done
    NSYS_LD=/tmp/x/usr/lib/x86_64-linux-gnu:$hostlib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    env LD_LIBRARY_PATH="$NSYS_LD" "$NSYS" --version
    [ "${NSYS_SMOKE:-1}" = 0 ] && return 0
    nsys_run "$W/reports/smoke" "$W/reports/smoke.sqlite" none \
        $PY -c "import torch; a=torch.randn(512,512,device='cuda'); print('smoke', float((a@a).sum()))" || return 1
    $PY -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); print('nsys smoke kernels:', c.execute('select count(*) from CUPTI_ACTIVITY_KIND_KERNEL').fetchone()[0])" "$W/reports/smoke.sqlite"
}

# nsys_run REPORT SQLITE RANGE(api|none) COMMAND...: profile (CUDA, NVTX, OS runtime; no CPU sampling or
# context switches), then export the report to SQLite.
nsys_run() {
    local rep=$1 db=$2 range=$3
    shift 3
    local extra=()
    [ "$range" = api ] && extra=(--capture-range=cudaProfilerApi --capture-range-end=stop)
    # a whole-process capture (the compile run) keeps only OS-runtime calls of 100 us or more and no
    # backtraces: with the defaults the compile workers' 358k short calls made an 18 MB export, and with
    # the threshold alone their backtraces still took 6 MB of 8
    [ "$range" = none ] && extra=(--osrt-threshold=100000 --backtrace=none)
    timeout "$(left)" env LD_LIBRARY_PATH="$NSYS_LD" "$NSYS" profile -t cuda,nvtx,osrt -s none --cpuctxsw=none \
        "${extra[@]}" --force-overwrite true -o "$rep" "$@" || { say "nsys profile failed: $rep"; return 1; }
    timeout "$(left)" env LD_LIBRARY_PATH="$NSYS_LD" "$NSYS" export --type sqlite --force-overwrite true \
        -o "$db" "$rep.nsys-rep" || { say "nsys export failed: $rep"; return 1; }
    ls -la "$db"
}

# traceadvisor's dependencies (polars, pyarrow, numba, ...) for the CLI on the device, from $SITE
deps_setup() {
    $PY -c "import polars, pyarrow, numba, msgspec, adbc_driver_sqlite, plotly, sqlite_utils" 2>/dev/null && return 0
    [ -f "${SITE:-}" ] || { say "deps: traceadvisor's dependencies are missing and \$SITE is not a file"; return 1; }
    mkdir -p /tmp/site && zstd -dc "$SITE" | tar -xf - -C /tmp/site
    export PYTHONPATH=/tmp/site:$ROOT${PYTHONPATH:+:$PYTHONPATH}
    $PY -c "import polars, pyarrow, numba; print('deps: polars', polars.__version__, 'pyarrow', pyarrow.__version__)"
}

# `traceadvisor profile --profiler nsys` as a user runs it: nsys on PATH, the CLI records, exports, analyzes
# (without traceadvisor's dependencies on the device: records and exports only, --no-analyze; the .sqlite
# comes back in profile.tgz and is analyzed where they are)
profile_nsys() {
    local out=$W/profile name=${PROFILE_NAME:-h200_gpt2_nsys_profile} extra=() ta=(traceadvisor)
    mkdir -p "$out"
    deps_setup || { extra=(--no-analyze); say "profile_nsys: --no-analyze (no dependencies for the analysis)"; }
    # the traceadvisor command, as `pip install .` gives it (its dependencies are not installed by this)
    $PY -m pip install -q --no-deps --no-build-isolation --no-index "$ROOT" >/dev/null 2>&1 ||
        say "pip install . failed: running python -m traceadvisor.cli.main"
    command -v traceadvisor >/dev/null || ta=($PY -m traceadvisor.cli.main)
    say "start profile_nsys (${ta[*]})"
    (cd "$ROOT" && timeout "$(left)" env PATH="$(dirname "$NSYS"):$PATH" LD_LIBRARY_PATH="$NSYS_LD" \
        "${ta[@]}" profile --profiler nsys -o "$out" --name "$name" "${extra[@]}" -- \
        python3 tools/gpu/profile_train.py ${PROFILE_ARGS:---steps 8}) 2>&1 | tee "$out/$name.log"
    say "end profile_nsys rc=${PIPESTATUS[0]}"
    if [ ${#extra[@]} = 0 ]; then
        (cd "$ROOT" && "${ta[@]}" analyze "$out/$name.sqlite" --json "$out/$name.json" --md "$out/$name.md" \
            --no-html) 2>&1 | tee -a "$out/$name.log"
    fi
    ls -la "$out"
}

stage() {
    local name=$1
    shift
    if [ "$(left)" -lt 20 ]; then say "SKIPPED $name: no time left"; return; fi
    say "start $name"
    timeout "$(left)" "$@"
    say "end $name rc=$?"
}

for s in "$@"; do
    case $s in
        calib) stage calib $PY "$HERE/calibrate.py" "$W/calibration" pinned item dataloader bf16 tf32 cudagraph ;;
        nsys_calib)
            if nsys_setup; then
                for p in pinned item; do
                    say "start nsys_$p"
                    nsys_run "$W/reports/${p}_base" "$W/calibration/${p}_base.nsys.sqlite" api \
                        $PY "$HERE/calibrate.py" "$W/calibration" "nsys_$p"
                    say "end nsys_$p rc=$?"
                done
            fi ;;
        compile) stage compile $PY "$HERE/calibrate.py" "$W/calibration" compile ;;
        repeat) stage repeat $PY "$HERE/calibrate.py" "$W/repeat" item pinned ;;  # noise check, not fixtures
        bf16_gpubound) stage bf16_gpubound $PY "$HERE/calibrate.py" "$W/calibration" bf16_gpubound ;;
        bf16_gpt2) stage bf16_gpt2 $PY "$HERE/calibrate.py" "$W/calibration" bf16_gpt2 ;;
        models) stage models $PY "$HERE/models.py" "$W/h200_models" ;;
        nsys_models)
            if [ -n "$NSYS" ] || nsys_setup; then
                for m in control_resnet50_warm:control_nsys:api cudagraph_decode:cudagraph_nsys:api \
                    compile_gpt2:compile_nsys:none; do
                    IFS=: read -r file scen range <<<"$m"
                    # NSYS_ONLY="compile_nsys ..." runs only the scenarios named
                    [[ -n "${NSYS_ONLY:-}" && " $NSYS_ONLY " != *" $scen "* ]] && continue
                    say "start $scen"
                    rm -rf "/tmp/cc_$scen" && mkdir -p "/tmp/cc_$scen"  # cold caches, also on a reused machine
                    nsys_run "$W/reports/h200_$file" "$W/h200_models/h200_$file.nsys.sqlite" "$range" \
                        env TORCHINDUCTOR_CACHE_DIR="/tmp/cc_$scen/inductor" TRITON_CACHE_DIR="/tmp/cc_$scen/triton" \
                        TORCHINDUCTOR_FX_GRAPH_CACHE=0 TORCHINDUCTOR_AUTOGRAD_CACHE=0 \
                        $PY "$HERE/models.py" "$W/h200_models" "$scen"
                    say "end $scen rc=$?"
                done
            fi ;;
        profile_nsys) { [ -n "$NSYS" ] || nsys_setup; } && profile_nsys ;;
        *) say "unknown stage $s" ;;
    esac
done
[ -d "$W/calibration/parts" ] && $PY "$HERE/calibrate.py" "$W/calibration" collect
[ -f "$HERE/models.py" ] && [ -d "$W/h200_models/parts" ] && $PY "$HERE/models.py" "$W/h200_models" collect
nvidia-smi >"$W/nvidia-smi.txt" 2>&1
mkdir -p "$W/repeat"
for d in calibration h200_models reports repeat profile; do
    [ -n "$(ls -A "$W/$d")" ] || continue
    tar czf "$W/$d.tgz" -C "$W" "$d"
    if [ "$(stat -c %s "$W/$d.tgz")" -gt 15728640 ]; then
        split -b 15M "$W/$d.tgz" "$OUTD/$d.tgz.part-"
    else
        cp "$W/$d.tgz" "$OUTD/"
    fi
done
cp "$W/nvidia-smi.txt" "$OUTD/" 2>/dev/null
ls -la "$OUTD"
say done
