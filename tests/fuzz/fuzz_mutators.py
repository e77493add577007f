"""Seeded mutators per format family. Each takes the seed file, a ``random.Random`` and an output folder, writes the
mutated input there (never touching the seed) and returns (path to import, mutation name).

Classes (issue 17): truncation, byte flips, corrupt SQLite pages, dropped tables/columns, type swaps, huge /
negative / NaN-like numbers, deep nesting, odd Unicode, CSV column drops / BOM / CRLF, stray -wal/-journal.
"""

from __future__ import annotations

import gzip
import json
import random
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

ODD_TEXT = (
    "",
    " ",
    "\u0000",
    "\ufeff",
    "\u202e\u0645\u0631\u062d\u0628\u0627",
    "\u200b\u200d",
    "\U0001f525" * 50,
    "\udcff",  # lone surrogate (escaped in JSON, replaced in files)
    "a" * 70_000,
    "<script>alert(1)</script>",
    "名前\u0301\u0301",
    "\\",
    '"',
    "\n\r\t",
    "NaN",
    "%s%n{0}",
)
ODD_NUMBERS = (
    0,
    -1,
    -(2**63),
    2**63 - 1,
    2**64,
    2**70,
    10**30,
    1e308,
    -1e308,
    1.5,
    -0.0,
    "NaN",
    "inf",
    "-inf",
    "1e999",
    "0x10",
    "",
    " 12 ",
)
WRONG_TYPES = (None, True, "text", 3.25, [], {}, [1, 2], {"a": 1}, "12", -7)


def _odd_value(rng: random.Random) -> object:
    pick = rng.random()
    if pick < 0.4:
        return rng.choice(ODD_NUMBERS)
    if pick < 0.7:
        return rng.choice(WRONG_TYPES)
    return rng.choice(ODD_TEXT)


# --------------------------------------------------------------------------------------------- bytes
def _read(seed: Path) -> bytes:
    return seed.read_bytes()


def truncate(data: bytes, rng: random.Random) -> bytes:
    if len(data) < 2:
        return b""
    return data[: rng.randrange(0, len(data))]


def flip(data: bytes, rng: random.Random) -> bytes:
    b = bytearray(data)
    for _ in range(rng.choice((1, 2, 4, 16, 64))):
        if b:
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
    return bytes(b)


def smear(data: bytes, rng: random.Random) -> bytes:
    """Overwrite a range with one byte value or random bytes."""
    if not data:
        return data
    b = bytearray(data)
    at = rng.randrange(len(b))
    n = min(len(b) - at, rng.choice((8, 100, 1000, 5000)))
    fill = (
        bytes(rng.getrandbits(8) for _ in range(n))
        if rng.random() < 0.5
        else bytes([rng.choice((0, 0xFF))]) * n
    )
    b[at : at + n] = fill
    return bytes(b)


BYTE_MUTATORS: dict[str, Callable[[bytes, random.Random], bytes]] = {
    "truncate": truncate,
    "byte-flip": flip,
    "smear": smear,
}


# --------------------------------------------------------------------------------------------- JSON
def _load_json(seed: Path) -> tuple[object, bool]:
    raw = seed.read_bytes()
    gz = raw[:2] == b"\x1f\x8b"
    return json.loads(gzip.decompress(raw) if gz else raw), gz


def _dump_json(doc: object, gz: bool) -> bytes:
    text = (
        json.dumps(doc, allow_nan=True)
        .replace(f'"{DEEP_MARK}"', DEEP_TEXT[0])
        .encode("utf-8", "surrogatepass")
    )
    return gzip.compress(text, compresslevel=1) if gz else text


def _containers(doc: object, limit: int = 200_000) -> list[object]:
    out, stack = [], [doc]
    while stack and len(out) < limit:
        x = stack.pop()
        if isinstance(x, (dict, list)):
            out.append(x)
            stack.extend(x.values() if isinstance(x, dict) else x)
    return out


def _events(doc: object) -> list[dict]:
    for key in ("traceEvents", "rocprofiler-sdk-tool"):
        if isinstance(doc, dict) and isinstance(doc.get(key), list):
            return [e for e in doc[key] if isinstance(e, dict)]
    return [c for c in _containers(doc) if isinstance(c, dict)]


def _dicts(doc: object) -> list[dict]:
    return [c for c in _containers(doc) if isinstance(c, dict) and c]


def json_set_odd(doc: object, rng: random.Random) -> str:
    ds = _dicts(doc)
    for _ in range(rng.choice((1, 3, 10, 50))):
        d = rng.choice(ds)
        d[rng.choice(list(d))] = _odd_value(rng)
    return "json-odd-values"


def json_drop_key(doc: object, rng: random.Random) -> str:
    ev = _events(doc) or _dicts(doc)
    keys = sorted({k for e in ev[:500] for k in e})
    if not keys:
        return "json-drop-key"
    k = rng.choice(keys)
    share = rng.choice((0.1, 0.5, 1.0))
    for e in ev:
        if rng.random() < share:
            e.pop(k, None)
    return f"json-drop-key:{k}"


def json_swap_field(doc: object, rng: random.Random) -> str:
    """One field of every event set to one wrong type / odd number (ph numbers, ts strings...)."""
    ev = _events(doc)
    keys = sorted({k for e in ev[:500] for k in e})
    if not keys:
        return "json-swap-field"
    k = rng.choice(keys)
    v = _odd_value(rng)
    for e in ev:
        if k in e:
            e[k] = v
    return f"json-swap-field:{k}"


def json_deep(doc: object, rng: random.Random) -> str:
    depth = rng.choice((100, 1000, 3000, 20_000))
    d = rng.choice(_events(doc) or _dicts(doc))
    d[rng.choice(("args", "name", "extra", "ts"))] = (
        DEEP_MARK  # spliced in as text (json.dumps would recurse)
    )
    opener = '{"a":' if rng.random() < 0.5 else "["
    closer = "}" if opener.startswith("{") else "]"
    DEEP_TEXT[0] = opener * depth + "1" + closer * depth
    return f"json-deep:{depth}"


DEEP_MARK = "__fuzz_deep_nesting__"
DEEP_TEXT = [""]


def json_unicode(doc: object, rng: random.Random) -> str:
    ev = _events(doc) or _dicts(doc)
    for _ in range(rng.choice((1, 5, 50))):
        e = rng.choice(ev)
        strs = [k for k, v in e.items() if isinstance(v, str)] or list(e)
        if strs:
            e[rng.choice(strs)] = rng.choice(ODD_TEXT) + rng.choice(("", "x", " kernel"))
    return "json-unicode"


def json_restructure(doc: object, rng: random.Random) -> str:
    """Top-level shape changes: events list replaced, wrapped, emptied, or a top-level key dropped."""
    if not isinstance(doc, dict):
        return "json-restructure:none"
    key = rng.choice(sorted(doc))
    how = rng.choice(("drop", "null", "dict", "string", "empty", "wrap"))
    if how == "drop":
        doc.pop(key)
    elif how == "null":
        doc[key] = None
    elif how == "dict":
        doc[key] = {"x": doc[key]}
    elif how == "string":
        doc[key] = "oops"
    elif how == "empty":
        doc[key] = [] if isinstance(doc[key], list) else {}
    else:
        doc[key] = [doc[key]]
    return f"json-restructure:{how}:{key}"


JSON_MUTATORS: dict[str, Callable[[object, random.Random], str]] = {
    "odd-values": json_set_odd,
    "drop-key": json_drop_key,
    "swap-field": json_swap_field,
    "deep": json_deep,
    "unicode": json_unicode,
    "restructure": json_restructure,
}


def mutate_json(seed: Path, rng: random.Random, out: Path) -> tuple[Path, str]:
    dst = out / seed.name
    if rng.random() < 0.3:
        name = rng.choice(list(BYTE_MUTATORS))
        data = _read(seed)
        if data[:2] == b"\x1f\x8b" and rng.random() < 0.7:  # mutate the text inside the gzip
            dst.write_bytes(gzip.compress(BYTE_MUTATORS[name](gzip.decompress(data), rng), compresslevel=1))
            return dst, f"text-{name}"
        dst.write_bytes(BYTE_MUTATORS[name](data, rng))
        return dst, name
    doc, gz = _load_json(seed)
    name = JSON_MUTATORS[rng.choice(list(JSON_MUTATORS))](doc, rng)
    dst.write_bytes(_dump_json(doc, gz))
    return dst, name


# --------------------------------------------------------------------------------------------- CSV
def _csv_rows(text: str) -> list[list[str]]:
    import csv
    import io

    return list(csv.reader(io.StringIO(text)))


def _csv_text(rows: list[list[str]], crlf: bool = False) -> str:
    import csv
    import io

    buf = io.StringIO()
    csv.writer(buf, lineterminator="\r\n" if crlf else "\n").writerows(rows)
    return buf.getvalue()


def mutate_csv(seed: Path, rng: random.Random, out: Path) -> tuple[Path, str]:
    dst = out / seed.name
    text = seed.read_text(encoding="utf-8", errors="replace")
    rows = _csv_rows(text)
    how = rng.choice(
        (
            "bytes",
            "drop-column",
            "bom",
            "crlf",
            "odd-cells",
            "swap-column",
            "unicode",
            "shuffle-header",
            "cut-row",
            "extra-column",
            "empty-cells",
            "dup-header",
        )
    )
    if how == "bytes" or not rows:
        name = rng.choice(list(BYTE_MUTATORS))
        dst.write_bytes(BYTE_MUTATORS[name](seed.read_bytes(), rng))
        return dst, name
    width = len(rows[0])
    if how == "drop-column" and width > 1:
        i = rng.randrange(width)
        rows = [r[:i] + r[i + 1 :] for r in rows]
        how = f"drop-column:{rows and text.splitlines()[0].split(',')[i] if i < len(text.splitlines()[0].split(',')) else i}"
    elif how == "bom":
        dst.write_bytes(b"\xef\xbb\xbf" + seed.read_bytes())
        return dst, "bom"
    elif how == "crlf":
        dst.write_bytes(seed.read_bytes().replace(b"\r\n", b"\n").replace(b"\n", b"\r\n"))
        return dst, "crlf"
    elif how in ("odd-cells", "unicode", "empty-cells"):
        for _ in range(rng.choice((1, 5, 50))):
            if len(rows) > 1:
                r = rows[rng.randrange(1, len(rows))]
                if r:
                    v = {
                        "odd-cells": lambda: str(_odd_value(rng)),
                        "unicode": lambda: rng.choice(ODD_TEXT),
                        "empty-cells": lambda: "",
                    }[how]()
                    r[rng.randrange(len(r))] = v.replace("\udcff", "\ufffd")
    elif how == "swap-column" and width:
        i = rng.randrange(width)
        v = str(_odd_value(rng)).replace("\udcff", "\ufffd")
        for r in rows[1:]:
            if i < len(r):
                r[i] = v
        how = f"swap-column:{rows[0][i]}"
    elif how == "shuffle-header":
        rng.shuffle(rows[0])
    elif how == "cut-row" and len(rows) > 1:
        r = rows[rng.randrange(1, len(rows))]
        del r[rng.randrange(len(r) + 1) :]
    elif how == "extra-column":
        for r in rows:
            r.append("x")
    elif how == "dup-header":
        rows.insert(rng.randrange(1, len(rows) + 1), list(rows[0]))
    dst.write_text(_csv_text(rows, crlf=rng.random() < 0.2), encoding="utf-8", errors="replace")
    return dst, how


# --------------------------------------------------------------------------------------------- SQLite
def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _tables(con: sqlite3.Connection) -> list[str]:
    return [
        r[0]
        for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")
        if not r[0].startswith("sqlite_")
    ]


def _columns(con: sqlite3.Connection, t: str) -> list[str]:
    return [r[1] for r in con.execute(f"PRAGMA table_info({_q(t)})")]


def _big_tables(con: sqlite3.Connection) -> list[str]:
    ts = _tables(con)
    sized = [(con.execute(f"SELECT count(*) FROM {_q(t)}").fetchone()[0], t) for t in ts]
    live = [t for n, t in sized if n]
    return live or ts


def sql_drop_table(con: sqlite3.Connection, rng: random.Random) -> str:
    t = rng.choice(_big_tables(con))
    con.execute(f"DROP TABLE {_q(t)}")
    return f"drop-table:{t}"


def sql_drop_column(con: sqlite3.Connection, rng: random.Random) -> str:
    t = rng.choice(_big_tables(con))
    cols = _columns(con, t)
    if len(cols) < 2:
        return sql_drop_table(con, rng)
    c = rng.choice(cols)
    keep = ", ".join(_q(x) for x in cols if x != c)
    con.execute(f"CREATE TABLE _fuzz_tmp AS SELECT {keep} FROM {_q(t)}")
    con.execute(f"DROP TABLE {_q(t)}")
    con.execute(f"ALTER TABLE _fuzz_tmp RENAME TO {_q(t)}")
    return f"drop-column:{t}.{c}"


def _sql_value(rng: random.Random) -> object:
    v = _odd_value(rng)
    if isinstance(v, (list, dict)):
        return json.dumps(v)
    if isinstance(v, int) and not -(2**63) <= v < 2**63:
        return str(v) if rng.random() < 0.5 else float(v)
    if isinstance(v, str):
        v = v.replace("\udcff", "\ufffd")
        return v.encode() if rng.random() < 0.15 else v
    return v


def sql_odd_values(con: sqlite3.Connection, rng: random.Random) -> str:
    t = rng.choice(_big_tables(con))
    cols = _columns(con, t)
    if not cols:
        return "odd-values:none"
    c = rng.choice(cols)
    share = rng.choice((0.01, 0.2, 1.0))
    rows = [r[0] for r in con.execute(f"SELECT rowid FROM {_q(t)}")]
    pick = [r for r in rows if rng.random() < share] or rows[:1]
    uniform = rng.random() < 0.5
    v = _sql_value(rng)
    for r in pick:
        con.execute(
            f"UPDATE OR IGNORE {_q(t)} SET {_q(c)} = ? WHERE rowid = ?",
            (v if uniform else _sql_value(rng), r),
        )
    return f"odd-values:{t}.{c}"


def sql_unicode(con: sqlite3.Connection, rng: random.Random) -> str:
    strings = [t for t in _tables(con) if "string" in t.lower()] or _big_tables(con)
    t = rng.choice(strings)
    cols = _columns(con, t)
    text_cols = [c for c in cols if c.lower() in ("value", "string", "name", "text")] or cols
    c = rng.choice(text_cols)
    rows = [r[0] for r in con.execute(f"SELECT rowid FROM {_q(t)}")]
    for r in rng.sample(rows, min(len(rows), rng.choice((1, 10, 100)))):
        con.execute(
            f"UPDATE {_q(t)} SET {_q(c)} = ? WHERE rowid = ?",
            (rng.choice(ODD_TEXT).replace("\udcff", "\ufffd"), r),
        )
    return f"unicode:{t}.{c}"


def sql_delete_rows(con: sqlite3.Connection, rng: random.Random) -> str:
    t = rng.choice(_tables(con))
    con.execute(f"DELETE FROM {_q(t)} WHERE abs(random()) % 3 = 0")
    return f"delete-rows:{t}"


SQL_MUTATORS: dict[str, Callable[[sqlite3.Connection, random.Random], str]] = {
    "drop-table": sql_drop_table,
    "drop-column": sql_drop_column,
    "odd-values": sql_odd_values,
    "unicode": sql_unicode,
    "delete-rows": sql_delete_rows,
}


def corrupt_pages(data: bytes, rng: random.Random) -> bytes:
    page = int.from_bytes(data[16:18], "big") if len(data) >= 100 else 4096
    page = 65536 if page == 1 else (page or 4096)
    n = max(1, len(data) // page)
    b = bytearray(data)
    for _ in range(rng.choice((1, 1, 2, 5))):
        p = rng.randrange(n) if rng.random() < 0.9 else 0
        start = p * page + (100 if p == 0 and rng.random() < 0.8 else 0)
        how = rng.random()
        if how < 0.3:
            b[start : (p + 1) * page] = bytes((p + 1) * page - start)
        elif how < 0.6:
            b[start : (p + 1) * page] = bytes(rng.getrandbits(8) for _ in range((p + 1) * page - start))
        else:
            for _ in range(rng.choice((1, 4, 16))):
                i = rng.randrange(start, min(len(b), (p + 1) * page))
                b[i] = rng.getrandbits(8)
    return bytes(b)


def mutate_sqlite(seed: Path, rng: random.Random, out: Path) -> tuple[Path, str]:
    dst = out / seed.name
    pick = rng.random()
    if pick < 0.35:
        data = _read(seed)
        if rng.random() < 0.6:
            dst.write_bytes(corrupt_pages(data, rng))
            return dst, "corrupt-pages"
        if rng.random() < 0.5:
            page = int.from_bytes(data[16:18], "big") or 4096
            cut = rng.randrange(0, max(1, len(data) // page)) * page
            dst.write_bytes(data[:cut])
            return dst, "truncate-at-page"
        name = rng.choice(list(BYTE_MUTATORS))
        dst.write_bytes(BYTE_MUTATORS[name](data, rng))
        return dst, name
    shutil.copyfile(seed, dst)
    if pick < 0.4:  # a stray sidecar file: garbage -wal / -journal next to the database
        side = rng.choice(("-wal", "-journal"))
        Path(str(dst) + side).write_bytes(
            bytes(rng.getrandbits(8) for _ in range(rng.choice((32, 4096, 40000))))
        )
        return dst, f"garbage{side}"
    con = sqlite3.connect(dst)
    names = []
    try:
        for _ in range(2 if rng.random() < 0.3 else 1):
            for _try in range(4):  # a mutation the schema refuses (constraints, triggers): another one
                try:
                    names.append(SQL_MUTATORS[rng.choice(list(SQL_MUTATORS))](con, rng))
                    con.commit()
                    break
                except sqlite3.Error:
                    con.rollback()
    finally:
        con.close()
    return dst, "+".join(names) or "noop"


# --------------------------------------------------------------------------------------------- folders
def mutate_folder(seed: Path, rng: random.Random, out: Path) -> tuple[Path, str]:
    dst = out / seed.name
    shutil.copytree(seed, dst)
    members = sorted(p for p in dst.iterdir() if p.is_file())
    victim = rng.choice(members)
    if rng.random() < 0.15:
        victim.unlink()
        return dst, f"folder-drop:{victim.name}"
    tmp = out / "_member"
    tmp.mkdir()
    kind = kind_of(victim)
    path, name = MUTATE[kind](victim, rng, tmp)
    shutil.move(str(path), str(victim))
    return dst, f"folder:{victim.name}:{name}"


def kind_of(p: Path) -> str:
    head = p.read_bytes()[:16]
    if head.startswith(b"SQLite format 3"):
        return "sqlite"
    if p.suffix == ".csv":
        return "csv"
    if head[:2] == b"\x1f\x8b" or head.lstrip()[:1] in (b"{", b"["):
        return "json"
    return "text"


def mutate_text(seed: Path, rng: random.Random, out: Path) -> tuple[Path, str]:
    dst = out / seed.name
    name = rng.choice(list(BYTE_MUTATORS))
    dst.write_bytes(BYTE_MUTATORS[name](seed.read_bytes(), rng))
    return dst, name


MUTATE: dict[str, Callable[[Path, random.Random, Path], tuple[Path, str]]] = {
    "json": mutate_json,
    "csv": mutate_csv,
    "sqlite": mutate_sqlite,
    "folder": mutate_folder,
    "text": mutate_text,
}
