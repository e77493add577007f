"""Fuzz campaign over the importers: seeded mutations of real corpus files, imported in-process.

Each case: mutate one seed file (``fuzz_mutators``) into a private folder, record sha256 + mtime of every input
file, import it with ``load_trace`` (cache off), optionally run the rules and render the JSON / Markdown (and every
``--html-every`` case the HTML) report, then classify:

* ``ok``: imported, inputs unchanged, events + skipped == input events, and not a silent empty import;
* ``clean``: the one-line ``Error: what. How to fix.`` (a TraceAdvisorError with a hint);
* ``internal``: any other exception (a traceback), a native panic, an error without a hint, a rule error;
* ``silent``: 0 events imported from a seed that has events, with no warning (a wrong answer given silently);
* ``accounting``: events + skipped != input events (or input_events unknown);
* ``modified``: an input file changed (sha256 or mtime);
* ``hang``: the case ran past the per-case timeout (its worker is killed and replaced);
* ``differs`` (family ``kineto_scan``): the compiled Kineto scanner, forced on for every size
  (``TRACEADVISOR_KINETO_SCAN=1``), imported other events or metadata than the msgspec path did, or gave
  another error. Big traces take the scanner, but only the small seeds make cases fast enough to fuzz: the
  mutations (cuts, flipped bytes, odd values) reach its hand-written JSON parsing the same way at any size.

Workers are spawned processes (never forked: a fork of a process whose polars/ADBC thread pools already ran
can deadlock in the child) that run cases in-process one after another; a case over the timeout is
interrupted by SIGALRM (a Python-level hang) or its worker killed (a native one).

Long campaign (prints the issue 17 table; 12,000 cases, about 1.3 cases/s with one worker on a loaded 2-core
machine, so 2.5 h there; ``--log`` keeps every record as it finishes and ``--table-from LOG`` prints the table of
a run stopped early)::

    nice -n 10 python tests/fuzz/fuzz_runner.py --cases 2000 --workers 1 --seed 17 --downstream 50 \
        --html-every 0 --log campaign.jsonl

CI smoke: ``tests/fuzz/test_fuzz_smoke.py`` (150 cases per family on the small seeds).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing as mp
import os
import random
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections import Counter, defaultdict
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fuzz_corpus import FAMILIES, SCAN_FAMILY, materialize, seeds  # noqa: E402
from fuzz_mutators import MUTATE  # noqa: E402

OUTCOMES = ("ok", "clean", "internal", "silent", "accounting", "modified", "hang", "differs")


class CaseTimeout(BaseException):
    """Raised by SIGALRM inside a case that ran past its time."""


def _snapshot(folder: Path) -> dict[str, tuple[str, int]]:
    out = {}
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            out[str(p.relative_to(folder))] = (
                hashlib.sha256(p.read_bytes()).hexdigest(),
                p.stat().st_mtime_ns,
            )
    return out


def _where(tb) -> str:
    """The innermost traceadvisor frame of a traceback (the defect's location), else the innermost frame."""
    frames = traceback.extract_tb(tb)
    ours = [f for f in frames if "traceadvisor" in f.filename and "fuzz" not in f.filename]
    f = (ours or frames or [None])[-1]
    if f is None:
        return "?"
    name = f.filename.split("traceadvisor/")[-1] if "traceadvisor/" in f.filename else Path(f.filename).name
    return f"{name}:{f.lineno}"


def _cause(e: BaseException) -> str:
    msg = " ".join(str(e).split())[:160]
    return f"{type(e).__name__} at {_where(e.__traceback__)}: {msg}"


_BASE: dict[str, int] = {}


def _base_events(seed_path: Path) -> int:
    key = str(seed_path)
    if key not in _BASE:
        from traceadvisor.importers import load_trace

        _BASE[key] = load_trace(seed_path, cache=False).events.height
    return _BASE[key]


def _accounting(tr) -> str | None:
    m = tr.meta
    skipped = sum(m.skipped.values())
    if m.input_events is None:
        return "input_events unknown"
    if tr.events.height + skipped != m.input_events:
        return f"{tr.events.height} events + {skipped} skipped != {m.input_events} input events"
    return None


def _downstream(tr, out: Path, html: bool) -> str | None:
    from traceadvisor.analysis import run_analysis
    from traceadvisor.report.json_report import write_json
    from traceadvisor.report.markdown import render_markdown

    res, _ = run_analysis([tr], use_config=False)
    if res.errors:
        e = res.errors[0]
        return f"rule error {e.get('rule')}: {' '.join(str(e.get('error')).split())[:160]}"
    write_json(res, out / "r.json")
    render_markdown(res)
    if html:
        from traceadvisor.report.html import write_html

        write_html(res, out / "r.html")
    return None


def _load(path: Path, family: str, scan: str = "1"):
    """``load_trace`` without the cache; for ``SCAN_FAMILY`` with the Kineto scanner forced on (``scan="1"``)
    or off (``"0"``)."""
    from traceadvisor.importers import load_trace

    if family != SCAN_FAMILY:
        return load_trace(path, cache=False)
    with mock.patch.dict(os.environ, {"TRACEADVISOR_KINETO_SCAN": scan}):
        return load_trace(path, cache=False)


def _scan_differs(path: Path, scanned) -> str | None:
    """How the msgspec path's import of ``path`` differs from the scanner's (a Trace, or the one-line error it
    gave); None when they are the same: the same events and metadata, or the same error."""
    from traceadvisor.errors import TraceAdvisorError

    try:
        plain = _load(path, SCAN_FAMILY, scan="0")
    except TraceAdvisorError as e:
        plain = e.one_line()
    if isinstance(scanned, str) or isinstance(plain, str):
        if scanned == plain:
            return None
        got = [x if isinstance(x, str) else f"{x.events.height} events" for x in (scanned, plain)]
        return f"scanner: {got[0][:90]} / msgspec path: {got[1][:90]}"
    if not scanned.events.equals(plain.events):
        return f"events differ: scanner {scanned.events.height}, msgspec path {plain.events.height}"
    a, b = scanned.meta.to_dict(), plain.meta.to_dict()
    if a != b:
        return "metadata differs: " + ", ".join(
            sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
        )
    return None


def run_case(
    family: str,
    case: int,
    base_seed: int,
    smoke: bool,
    work: Path,
    downstream: int,
    html_every: int,
    timeout: float,
) -> dict:
    from traceadvisor.errors import ImportFailure, TraceAdvisorError

    rng = random.Random(f"{base_seed}:{family}:{case}")
    seed = rng.choice(seeds(family, smoke))
    src = materialize(seed)
    out = work / f"{family}-{case}"
    inp, rep = out / "in", out / "rep"
    inp.mkdir(parents=True)
    rep.mkdir()
    rec = {"family": family, "case": case, "seed": seed.rel, "mutation": "", "outcome": "ok", "detail": ""}
    t0 = time.perf_counter()
    signal.signal(signal.SIGALRM, _alarm)
    try:
        path, rec["mutation"] = MUTATE[seed.kind](src, rng, inp)
        base = _base_events(src)
        before = _snapshot(inp)
        signal.setitimer(signal.ITIMER_REAL, timeout)
        try:
            tr = _load(path, family)
            problem = _accounting(tr)
            differs = _scan_differs(path, tr) if family == SCAN_FAMILY else None
            if differs:
                rec.update(outcome="differs", detail=differs)
            elif problem:
                rec.update(outcome="accounting", detail=problem)
            elif tr.events.height == 0 and base > 0 and not tr.meta.warnings:
                rec.update(outcome="silent", detail=f"0 events from a seed with {base}, no warning")
            elif downstream and case % downstream == 0:
                err = _downstream(tr, rep, html_every > 0 and case % html_every == 0)
                if err:
                    rec.update(outcome="internal", detail=err)
        except ImportFailure as e:  # the importer boundary's net caught an unexpected failure: a defect
            rec.update(outcome="internal", detail=_cause(e.__cause__ or e))
        except TraceAdvisorError as e:
            differs = _scan_differs(path, e.one_line()) if family == SCAN_FAMILY else None
            if differs:
                rec.update(outcome="differs", detail=differs)
            elif e.hint:
                rec.update(outcome="clean", detail=e.one_line()[:200])
            else:
                rec.update(outcome="internal", detail="error without a hint: " + e.one_line()[:200])
        except CaseTimeout:
            rec.update(outcome="hang", detail=f"over {timeout:g} s (interrupted)")
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as e:  # noqa: BLE001 - Rust panics derive from BaseException: every escape counts
            rec.update(outcome="internal", detail=_cause(e))
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        if rec["outcome"] != "hang" and _snapshot(inp) != before:
            rec.update(outcome="modified", detail="an input file changed")
    finally:
        rec["seconds"] = round(time.perf_counter() - t0, 3)
        shutil.rmtree(out, ignore_errors=True)
    return rec


def _alarm(signum, frame) -> None:
    raise CaseTimeout()


def _worker(conn, work: str, args: dict) -> None:
    os.environ.setdefault("TRACEADVISOR_NO_PROGRESS", "1")
    while True:
        job = conn.recv()
        if job is None:
            return
        family, case = job
        try:
            conn.send(run_case(family, case, work=Path(work), **args))
        except BaseException as e:  # noqa: BLE001 - harness failure: reported, the worker goes on
            conn.send(
                {
                    "family": family,
                    "case": case,
                    "seed": "?",
                    "mutation": "?",
                    "outcome": "internal",
                    "detail": "harness: " + _cause(e),
                    "seconds": 0,
                }
            )


class Pool:
    """Spawned workers, one case at a time each; a worker that overruns is killed and replaced."""

    def __init__(self, n: int, work: Path, args: dict, timeout: float) -> None:
        self.ctx = mp.get_context("spawn")
        self.work, self.args, self.timeout = work, args, timeout
        self.slots = [self._spawn() for _ in range(n)]

    def _spawn(self):
        parent, child = self.ctx.Pipe()
        p = self.ctx.Process(target=_worker, args=(child, str(self.work), self.args), daemon=True)
        p.start()
        return {"proc": p, "conn": parent, "job": None, "since": 0.0}

    def run(self, jobs: list[tuple[str, int]], on_result) -> None:
        todo = list(reversed(jobs))
        busy = 0
        while todo or busy:
            for s in self.slots:
                if s["job"] is None and todo:
                    s["job"], s["since"] = todo.pop(), time.monotonic()
                    s["conn"].send(s["job"])
                    busy += 1
            for i, s in enumerate(self.slots):
                if s["job"] is None:
                    continue
                if s["conn"].poll(0.01):
                    try:
                        on_result(s["conn"].recv())
                    except EOFError:
                        on_result(self._lost(s, "worker died"))
                        self.slots[i] = self._spawn()
                    else:
                        s["job"] = None
                    busy -= 1
                elif time.monotonic() - s["since"] > self.timeout + 20 or not s["proc"].is_alive():
                    dead = not s["proc"].is_alive()
                    s["proc"].kill()
                    s["proc"].join()
                    on_result(self._lost(s, "worker died (native crash)" if dead else "native hang (killed)"))
                    self.slots[i] = self._spawn()
                    busy -= 1

    def _lost(self, s, why: str) -> dict:
        family, case = s["job"]
        outcome = "internal" if "died" in why else "hang"
        return {
            "family": family,
            "case": case,
            "seed": "?",
            "mutation": "?",
            "outcome": outcome,
            "detail": why,
            "seconds": round(time.monotonic() - s["since"], 3),
        }

    def close(self) -> None:
        for s in self.slots:
            try:
                s["conn"].send(None)
            except (BrokenPipeError, OSError):
                pass
            s["proc"].join(timeout=5)
            if s["proc"].is_alive():
                s["proc"].kill()


def campaign(
    cases: int,
    families=FAMILIES,
    *,
    seed: int = 17,
    smoke: bool = False,
    workers: int = 2,
    timeout: float = 30.0,
    downstream: int = 5,
    html_every: int = 50,
    progress: bool = False,
    log: Path | None = None,
) -> list[dict]:
    """Run ``cases`` cases per family; returns one record per case."""
    work = Path(tempfile.mkdtemp(prefix="traceadvisor-fuzz-"))
    # the scanner compiled (or loaded from numba's cache) once here: the workers then load it from the cache
    if SCAN_FAMILY in families:
        from traceadvisor.importers import _kineto_fast

        _kineto_fast._scanner()
    for f in families:  # trimmed seeds made once, before the workers start
        for s in seeds(f, smoke):
            materialize(s)
    args = {
        "base_seed": seed,
        "smoke": smoke,
        "downstream": downstream,
        "html_every": html_every,
        "timeout": timeout,
    }
    jobs = [(f, i) for i in range(cases) for f in families]
    out: list[dict] = []
    t0 = time.monotonic()

    def got(r: dict) -> None:
        out.append(r)
        if log is not None:
            with open(log, "a") as fh:
                fh.write(json.dumps(r) + "\n")
        if progress and len(out) % 200 == 0:
            print(
                f"  {len(out)}/{len(jobs)} cases, {time.monotonic() - t0:.0f} s", file=sys.stderr, flush=True
            )

    pool = Pool(max(1, workers), work, args, timeout)
    try:
        pool.run(jobs, got)
    finally:
        pool.close()
        shutil.rmtree(work, ignore_errors=True)
    return sorted(out, key=lambda r: (r["family"], r["case"]))


def table(results: list[dict]) -> str:
    by = defaultdict(Counter)
    for r in results:
        by[r["family"]][r["outcome"]] += 1
    head = "| importer | cases | ok | clean errors | tracebacks / internal errors | wrong silence | accounting violations | inputs modified | hangs | scanner differs |"
    lines = [head, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for f in FAMILIES:
        if f not in by:
            continue
        c = by[f]
        lines.append(
            f"| {f} | {sum(c.values())} | {c['ok']} | {c['clean']} | {c['internal']} | {c['silent']} | "
            f"{c['accounting']} | {c['modified']} | {c['hang']} | {c['differs']} |"
        )
    return "\n".join(lines)


def defects(results: list[dict]) -> list[dict]:
    return [r for r in results if r["outcome"] not in ("ok", "clean")]


def causes(results: list[dict]) -> Counter:
    """Distinct defect causes (type and location), for triage."""
    return Counter(  # noqa: E501
        f"{r['family']} {r['outcome']}: {r['detail'].split(': ')[0] if r['outcome'] == 'internal' else r['detail'][:90]}"
        for r in defects(results)
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=2000, help="cases per family (default 2000)")
    ap.add_argument("--family", action="append", choices=FAMILIES, help="only these families (repeatable)")
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds per case before it counts as a hang")
    ap.add_argument("--smoke", action="store_true", help="only the small seeds (as the CI smoke)")
    ap.add_argument(
        "--downstream", type=int, default=5, help="run rules + JSON/Markdown every Nth ok case (0: never)"
    )
    ap.add_argument(
        "--html-every", type=int, default=50, help="also the HTML report every Nth case (0: never)"
    )
    ap.add_argument("--json", type=Path, help="write every case record here")
    ap.add_argument("--log", type=Path, help="append each case record here as it finishes (JSON lines)")
    ap.add_argument(
        "--table-from",
        type=Path,
        help="print the table and causes of a --log file (a run stopped early) and exit",
    )
    a = ap.parse_args(argv)
    if a.table_from:
        return report([json.loads(line) for line in a.table_from.read_text().splitlines() if line.strip()])
    t0 = time.monotonic()
    res = campaign(
        a.cases,
        tuple(a.family or FAMILIES),
        seed=a.seed,
        smoke=a.smoke,
        workers=a.workers,
        timeout=a.timeout,
        downstream=a.downstream,
        html_every=a.html_every,
        progress=True,
        log=a.log,
    )
    if a.json:
        a.json.write_text(json.dumps(res, indent=1))
    print(
        f"{len(res)} cases in {time.monotonic() - t0:.0f} s (seed {a.seed}, load average {os.getloadavg()[0]:.1f})\n"
    )
    return report(res)


def report(res: list[dict]) -> int:
    """Print the table and the distinct defect causes; 1 when there is any defect."""
    print(table(res))
    cs = causes(res)
    if cs:
        print(f"\n{sum(cs.values())} defect cases, {len(cs)} distinct causes:")
        for c, n in cs.most_common():
            print(f"  {n:5d}  {c}")
    return 1 if cs else 0


if __name__ == "__main__":
    sys.exit(main())
