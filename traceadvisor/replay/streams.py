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
    gpu: Rows,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """GPU-side waits that the trace names only by their host call: a ``cudaStreamWaitEvent`` /
    ``hipStreamWaitEvent`` with neither the event nor the streams (Kineto and rocprof record none). The first
    activity a thread launches after such a call (the launch onto the stream that waits) waits for the latest
    activity of each other stream of its device launched before that call, where that activity ended before it
    started in the trace (cuDNN's RNN runs its layers on side streams joined by events; DDP's
    collectives wait for the gradients). Weight 0 and only where the recorded times agree: the replay of the
    trace is unchanged, but a fix that removes the launches that kept the order (one graph per step) keeps it."""
    none = (np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int64))
    waits = np.nonzero(is_wait[:nh])[0]
    gi = np.nonzero(g_launcher >= 0)[0]
    if not len(waits) or not len(gi):
        return none
    launch = start[g_launcher[gi]]
    th = thread[g_launcher[gi]]
    o = lexsort((launch, th))
    gi, launch, th = gi[o], launch[o], th[o]
    prev_launch = np.full(len(gi), NEG, np.int64)
    same = th[1:] == th[:-1]
    prev_launch[1:][same] = launch[:-1][same]
    # per activity: the latest stream-wait call of its launching thread before its launch and after that
    # thread's previous launch (a wait is followed by the launch onto the stream that waits)
    wait_at = np.full(len(gi), NEG, np.int64)
    w_th, w_start = thread[waits], start[waits]
    for t in np.unique(w_th):
        ws = np.sort(w_start[w_th == t])
        q = np.nonzero(th == t)[0]
        k = np.searchsorted(ws, launch[q], side="left") - 1
        ok = k >= 0
        at = np.where(ok, ws[np.maximum(k, 0)], NEG)
        ok &= at > prev_launch[q]
        wait_at[q[ok]] = at[ok]
    q = np.nonzero(wait_at != NEG)[0]
    if not len(q):
        return none
    dev = (gpu.rank * 4096 + gpu.device)[gi]
    sc = stream[gi + nh]
    by_launch = np.argsort(launch, kind="stable")
    src, dst = [], []
    for s in np.unique(sc):
        on = by_launch[sc[by_launch] == s]  # the stream's activities in launch order
        qq = q[(dev[q] == dev[on[0]]) & (sc[q] != s)]
        if not len(qq):
            continue
        k = np.searchsorted(launch[on], wait_at[qq], side="left") - 1
        ok = k >= 0
        y = gi[on[np.maximum(k, 0)]] + nh
        x = gi[qq] + nh
        ok &= end[y] <= start[x]
        src.append(2 * y[ok] + 1)
        dst.append(2 * x[ok])
    if not src:
        return none
    s_, d_ = np.concatenate(src), np.concatenate(dst)
    return s_, d_, np.zeros(len(s_), np.int64)
