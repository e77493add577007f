"""Dependencies between the GPU streams of a device, for the replay graph (``replay.graph``): the activity of
another stream an activity waited for, read from the recorded times (``cross_stream``) and from the stream-wait
calls the trace records without their streams (``event_wait_edges``). Points and ``NEG`` as in ``replay.graph``."""

from __future__ import annotations

import numpy as np

from traceadvisor.replay.rows import Rows, lexsort

NEG = np.iinfo(np.int64).min // 4  # "no release time" (replay.graph.NEG)

CROSS_STREAM_SLACK_NS = 10_000  # an activity starting this soon after another stream's end waited for it
CROSS_STREAM_MIN_WAIT_NS = 20_000  # ... when it started at least this long after its launch allowed


def cross_stream(gpu, nh, end, stream, g_start, prev_end, launch_ready, cand, slack_ns=None):
    """Per GPU activity: the activity on another stream of its device it waited for (node, end), or -1: the
    latest to end before it started, at most ``slack_ns`` (default ``CROSS_STREAM_SLACK_NS``) before."""
    slack_ns = CROSS_STREAM_SLACK_NS if slack_ns is None else slack_ns
    ng = len(gpu.eid)
    x_node = np.full(ng, -1, np.int64)
    x_end = np.full(ng, NEG, np.int64)
    late = (
        cand
        & (g_start - launch_ready >= CROSS_STREAM_MIN_WAIT_NS)
        & (g_start - prev_end >= CROSS_STREAM_MIN_WAIT_NS)
    )
    q = np.nonzero(late)[0]
    if not len(q):
        return x_node, x_end
    dev = gpu.rank * 4096 + gpu.device
    ge = end[nh:]
    for d in np.unique(dev[q]):
        on = np.nonzero(dev == d)[0]
        on = on[np.argsort(ge[on], kind="stable")]
        e = ge[on]
        qq = q[dev[q] == d]
        k = np.searchsorted(e, g_start[qq], side="right") - 1
        ok = k >= 0
        kk = np.maximum(k, 0)
        hit = on[kk]
        ok &= (stream[hit + nh] != stream[qq + nh]) & (g_start[qq] - e[kk] <= slack_ns)
        x_node[qq[ok]] = hit[ok] + nh
        x_end[qq[ok]] = e[kk[ok]]
    return x_node, x_end


def event_wait_edges(
    nh: int,
    start: np.ndarray,
    end: np.ndarray,
    stream: np.ndarray,
    thread: np.ndarray,
    g_launcher: np.ndarray,
    is_wait: np.ndarray,
    is_record: np.ndarray,
    gpu: Rows,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """GPU-side waits that the trace names only by their host calls: ``cudaEventRecord`` then
    ``cudaStreamWaitEvent`` (HIP alike) with neither the event nor the streams (Kineto and rocprof record none).
    The first activity launched onto each stream after a stream-wait call of its launching thread waits for the
    activity that thread launched last before its latest event-record call before the wait (the work the event
    marks: ``torch.cuda.Stream.wait_stream`` records on the current stream and waits on the other; cuDNN records
    once and makes 8 streams wait), when it is on another stream of the device and ended before the waiting
    activity started in the trace. cuDNN's RNN
    joins its side streams this way; DDP's and torchrec's collectives wait for the gradients and inputs. Weight 0
    and only where the recorded times agree: the replay of the trace is unchanged, but a fix that removes the
    launches that kept the order (one graph per step) keeps it. A wait with no record before it on its thread
    (an event recorded on another thread) adds nothing."""
    none = (np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int64))
    waits = np.nonzero(is_wait[:nh])[0]
    records = np.nonzero(is_record[:nh])[0]
    gi = np.nonzero(g_launcher >= 0)[0]
    if not len(waits) or not len(records) or not len(gi):
        return none
    launch = start[g_launcher[gi]]
    th = thread[g_launcher[gi]]
    sc = stream[gi + nh]
    # per activity, the previous launch onto its stream
    o = lexsort((launch, sc))
    prev_launch = np.full(len(gi), NEG, np.int64)
    same = sc[o][1:] == sc[o][:-1]
    prev_launch[o[1:][same]] = launch[o][:-1][same]
    src_pos = np.full(len(gi), -1, np.int64)  # per activity: the index (into gi) of the activity it waits for
    for t in np.intersect1d(thread[waits], thread[records]):
        ws = np.sort(start[waits][thread[waits] == t])
        rs = np.sort(start[records][thread[records] == t])
        mine = np.nonzero(th == t)[0]
        mine = mine[np.argsort(launch[mine], kind="stable")]  # the thread's launches in order
        # the latest wait on the thread before each launch, after the previous launch onto its stream
        k = np.searchsorted(ws, launch[mine], side="left") - 1
        at = ws[np.maximum(k, 0)]
        ok = (k >= 0) & (at > prev_launch[mine])
        # the latest record before that wait, and the thread's latest launch before that record
        kr = np.searchsorted(rs, at, side="left") - 1
        ok &= kr >= 0
        ky = np.searchsorted(launch[mine], rs[np.maximum(kr, 0)], side="left") - 1
        ok &= ky >= 0
        src_pos[mine[ok]] = mine[np.maximum(ky, 0)][ok]
    q = np.nonzero(src_pos >= 0)[0]
    if not len(q):
        return none
    x, y = gi[q] + nh, gi[src_pos[q]] + nh
    dev = gpu.rank * 4096 + gpu.device
    ok = (stream[x] != stream[y]) & (dev[x - nh] == dev[y - nh]) & (end[y] <= start[x])
    x, y = x[ok], y[ok]
    return 2 * y + 1, 2 * x, np.zeros(len(x), np.int64)
