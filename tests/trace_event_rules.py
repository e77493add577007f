"""The trace-event format's rules (Chrome "Trace Event Format" document, as Perfetto's JSON importer applies
them), checked on a parsed document. Independent of traceadvisor's exporter: it reads only the JSON."""

from __future__ import annotations

import bisect
from collections import Counter, defaultdict
from decimal import Decimal
from typing import Any

PHASES = set("BEXiIbneCMsftPONDRT") | {"(", ")"}
META_NAMES = {"process_name", "thread_name", "process_sort_index", "thread_sort_index", "process_labels"}


def ns(v: Any) -> int:
    assert isinstance(v, (int, Decimal)) and not isinstance(v, bool), f"timestamp {v!r} is not a number"
    return int(Decimal(v) * 1000)


def check(doc: Any) -> dict[str, Any]:
    """Assert every rule; return what was seen (counts per phase, flows, lanes, names)."""
    assert isinstance(doc, dict), "the JSON object form: {traceEvents: [...]}"
    events = doc["traceEvents"]
    assert isinstance(events, list)
    assert doc.get("displayTimeUnit", "ms") in ("ms", "ns")
    phases: Counter = Counter()
    slices: dict[tuple, list[tuple[int, int]]] = defaultdict(list)
    lanes_used: set[tuple] = set()
    pids_used: set = set()
    proc_names: dict = {}
    thread_names: dict = {}
    v1: dict[tuple, list[tuple[str, tuple, int]]] = defaultdict(list)
    v2: dict[Any, list[str]] = defaultdict(list)
    for e in events:
        assert isinstance(e, dict), e
        ph = e.get("ph")
        assert ph in PHASES, f"unknown phase {ph!r}"
        phases[ph] += 1
        assert isinstance(e.get("name"), str), f"event without a name: {e}"
        if "cat" in e:
            assert isinstance(e["cat"], str)
        pid, tid = e.get("pid"), e.get("tid")
        assert isinstance(pid, int) and isinstance(tid, int), f"pid/tid must be integers: {e}"
        if "args" in e:
            assert isinstance(e["args"], dict), f"args must be an object: {e}"
        if ph == "M":
            assert e["name"] in META_NAMES, e
            a = e["args"]
            if e["name"].endswith("_name"):
                assert isinstance(a.get("name"), str) and a["name"], e
                (proc_names if e["name"] == "process_name" else thread_names)[
                    pid if e["name"] == "process_name" else (pid, tid)
                ] = a["name"]
            elif e["name"].endswith("_sort_index"):
                assert isinstance(a.get("sort_index"), int), e
            continue
        t = ns(e["ts"])
        assert t >= 0, f"negative timestamp: {e}"
        pids_used.add(pid)
        if ph == "X":
            d = ns(e["dur"])
            assert d >= 0, e
            slices[(pid, tid)].append((t, d))
            lanes_used.add((pid, tid))
            if "bind_id" in e:
                assert e.get("flow_in") or e.get("flow_out"), e
                v2[e["bind_id"]].append("out" if e.get("flow_out") else "in")
        elif ph in ("i", "I"):
            assert e.get("s", "t") in ("g", "p", "t"), e
            lanes_used.add((pid, tid))
        elif ph == "C":
            a = e.get("args")
            assert a, f"counter without values: {e}"
            for k, v in a.items():
                assert isinstance(v, (int, Decimal)) and not isinstance(v, bool), (k, v)
        elif ph in ("s", "t", "f"):
            assert "id" in e, f"flow event without an id: {e}"
            if ph == "f":
                assert e.get("bp") == "e", f"flow end not bound to its enclosing slice: {e}"
            v1[(e["id"], e.get("cat"), e["name"])].append((ph, (pid, tid), t))
    nesting = {lane: _check_nesting(lane, s) for lane, s in slices.items()}
    for ss in slices.values():
        ss.sort()
    for key, ends in v1.items():
        kinds = Counter(p for p, _, _ in ends)
        assert kinds["s"] == 1 and kinds["f"] >= 1, f"flow {key}: {dict(kinds)}"
        for _, lane, t in ends:
            assert _enclosed(slices.get(lane, []), t), f"flow {key} at {t} ns has no slice on {lane}"
    for bid, ends in v2.items():
        assert sorted(ends) == ["in", "out"], f"bind_id {bid}: {ends}"
    missing_p = pids_used - set(proc_names)
    assert not missing_p, f"processes without a process_name: {sorted(missing_p)[:5]}"
    missing_t = lanes_used - set(thread_names)
    assert not missing_t, f"threads without a thread_name: {sorted(missing_t)[:5]}"
    return {
        "phases": phases,
        "flows_v1": len(v1),
        "flows_v2": len(v2),
        "process_names": proc_names,
        "thread_names": thread_names,
        "max_depth": max(nesting.values(), default=0),
    }


def _check_nesting(lane: tuple, ss: list[tuple[int, int]]) -> int:
    """Duration events of one thread nest (a child ends no later than its parent). Returns the max depth."""
    stack: list[int] = []
    depth = 0
    for t, d in sorted(ss, key=lambda x: (x[0], -x[1])):
        while stack and stack[-1] <= t:
            stack.pop()
        assert not stack or t + d <= stack[-1], f"slice [{t}, {t + d}) ns overlaps its parent on {lane}"
        stack.append(t + d)
        depth = max(depth, len(stack))
    return depth


def _enclosed(ss: list[tuple[int, int]], t: int) -> bool:
    i = bisect.bisect_right(ss, (t, float("inf")))
    return any(a <= t <= a + d for a, d in ss[max(0, i - 64) : i])
