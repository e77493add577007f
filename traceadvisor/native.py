"""Compiled kernels run from their machine code kept on disk, without numba in the process.

numba compiles traceadvisor's kernels (the Kineto scanner's, the replay's), and its own on-disk cache spares the
compile; loading from that cache still imports numba and rebuilds its typing and target registries, about 300 of
its modules: 0.45-0.6 CPU-s in every process that runs a kernel (cProfile, 8 Dec 2026; numba 0.68). The import
of the 470 MB benchmark waited 0.3-0.4 s for it; an analysis loaded the replay's kernels the same way, in a
background thread.

So each kernel is also a C-callable entry point (a numba ``cfunc``: pointers and int64s in, an int64 out), and
once numba has built it, its object code goes into one file per ``Library`` beside numba's cache. A later
process loads that file with llvmlite alone (0.04-0.08 s, the helper modules below included) and calls the
entry points through ``ctypes``, which releases the GIL during the call. The file's name carries a key of every
input of the code: the library's source files, numba's and llvmlite's versions, the Python version and the
host CPU with its features; a file that does not match it, or fails its checksum, is ignored.

The object code refers to a few functions outside it: numba's error path (``numba_gil_ensure``, ``numba_do_raise``,
... in numba's ``_helperlib``), NRT's reference counting (in ``_nrt_python``; never reached, since the kernels
receive plain buffers and allocate nothing), the Python C API and libc. These are looked up in those two
extension modules, loaded on their own (numba's package is not imported), and in the process. A kernel whose
code would allocate through NRT is not saved (NRT is not set up without numba), nor is one that refers to a
symbol none of these provides: that library keeps using numba. Linux (ELF object files) only.
"""

from __future__ import annotations

import contextlib
import ctypes
import glob
import hashlib
import importlib.machinery
import importlib.util
import json
import os
import struct
import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# NRT functions that allocate: code that calls them needs numba's runtime set up, so it is never saved
_ALLOCATES = ("NRT_MemInfo_alloc", "NRT_MemInfo_new", "NRT_MemInfo_varsize", "NRT_Allocate")
_FORMAT = 1  # of the file: its header's layout
_LOCK = threading.Lock()
# llvmlite's execution engines of the loaded libraries: their code lives as long as they do
_ENGINES: list[Any] = []


@dataclass(frozen=True)
class Library:
    """A set of kernels compiled from ``sources`` (module names: their files key the saved code). ``kernels``:
    name -> parameter kinds, one letter each: ``i`` an int64, ``q`` / ``B`` / ``?`` a C-contiguous array of int64 /
    uint8 / bool (its data pointer); every kernel returns an int64. ``build`` ("module:function") returns the numba
    cfuncs by kernel name (it imports numba)."""

    name: str
    sources: tuple[str, ...]
    kernels: tuple[tuple[str, str], ...]
    build: str


_ARRAYS = {"q": "int64", "B": "uint8", "?": "bool"}


class Kernels:
    """The loaded kernels of a library: ``kernels.NAME(*args)`` runs kernel NAME (arrays and ints, as its
    ``Library.kernels`` entry says; an array of another type or layout raises TypeError: the kernel trusts its
    arguments); ``native``: whether they run from saved code (numba was not imported)."""

    def __init__(
        self, functions: dict[str, tuple[Callable[..., int], str]], native: bool, keep: Any = None
    ) -> None:
        self.__dict__.update({name: _caller(name, f, params) for name, (f, params) in functions.items()})
        self.native = native
        self._keep = keep  # what owns the code (numba's cfuncs), where not the saved code's engines


def _caller(name: str, f: Callable[..., int], params: str) -> Callable[..., int]:
    arrays = [(i, _ARRAYS[c]) for i, c in enumerate(params) if c != "i"]

    def call(*args: Any) -> int:
        # ``args`` holds every array until the kernel returns: it keeps no reference of its own
        values = list(args)
        for i, dtype in arrays:
            a = args[i]
            if a.dtype != dtype or not a.flags.c_contiguous:
                raise TypeError(f"{name}: argument {i} must be a C-contiguous {dtype} array, not {a.dtype}")
            values[i] = a.ctypes.data
        return f(*values)

    return call


def signatures(lib: Library) -> dict[str, Any]:
    """The numba signature of each of ``lib``'s kernels, from its parameter kinds (``Library.kernels``); imports
    numba."""
    from numba import types

    return {
        name: types.int64(*(types.int64 if c == "i" else types.voidptr for c in p)) for name, p in lib.kernels
    }


def load(lib: Library) -> Kernels | None:
    """``lib``'s kernels from their saved machine code; None where none is saved for this exact code, host and
    toolchain (or it does not load here)."""
    with _LOCK:
        try:
            path = _path(lib)
            if path is None or not path.is_file():
                return None
            return _load_file(lib, path)
        except Exception:  # noqa: BLE001 - a damaged or foreign file: numba builds the kernels instead
            return None


def build(lib: Library) -> Kernels:
    """``lib``'s kernels built by numba (from numba's cache where it holds them), their machine code saved for
    ``load``; called through the numba cfuncs themselves where it cannot be saved."""
    module, func = lib.build.split(":")
    cfuncs = getattr(importlib.import_module(module), func)()
    with _LOCK:
        with contextlib.suppress(Exception):  # not saved: no writable place, not ELF, an unsupported symbol
            path = _path(lib)
            if path is not None:
                _save(lib, cfuncs, path)
                loaded = _load_file(lib, path)
                if loaded is not None:
                    return loaded
    functions = {name: (_ctypes_function(cfuncs[name].address, p), p) for name, p in lib.kernels}
    return Kernels(functions, native=False, keep=cfuncs)


def _ctypes_function(address: int, params: str) -> Callable[..., int]:
    """The C function at ``address`` called through ctypes (which releases the GIL while it runs)."""
    kinds = [ctypes.c_int64 if c == "i" else ctypes.c_void_p for c in params]
    return ctypes.CFUNCTYPE(ctypes.c_int64, *kinds)(address)


# --- the file -------------------------------------------------------------------------------------------------
def _path(lib: Library) -> Path | None:
    """Where ``lib``'s code is saved: numba's cache directory (``NUMBA_CACHE_DIR``), else the ``__pycache__`` beside
    the library's first source where writable, else traceadvisor's cache directory (``jit.njit``'s order)."""
    if not sys.platform.startswith("linux"):
        return None
    name = f"{lib.name}-{_key(lib)}.native"
    env = os.environ.get("NUMBA_CACHE_DIR")
    if env:
        return Path(env) / name
    spec = importlib.util.find_spec(lib.sources[0])
    if spec is not None and spec.origin:
        here = Path(spec.origin).parent / "__pycache__"
        if os.access(here if here.exists() else here.parent, os.W_OK):
            return here / name
    from traceadvisor.jit import fallback_cache_dir

    return fallback_cache_dir() / name


def _key(lib: Library) -> str:
    import llvmlite.binding as llvm

    h = hashlib.sha256(repr((_FORMAT, lib.name, lib.kernels, sys.version_info[:2])).encode())
    for name in lib.sources:
        h.update(Path(importlib.util.find_spec(name).origin).read_bytes())  # type: ignore[union-attr,arg-type]
    for package in ("numba", "llvmlite"):
        h.update(_package_file(package, "_version.py").read_bytes())
    h.update(llvm.get_host_cpu_name().encode())
    h.update(llvm.get_host_cpu_features().flatten().encode())
    return h.hexdigest()[:24]


def _package_file(package: str, relative: str) -> Path:
    """A file of an installed package, found without importing the package."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(package)
    return Path(next(iter(spec.submodule_search_locations))) / relative


def _save(lib: Library, cfuncs: dict[str, Any], path: Path) -> None:
    """Each cfunc's object code (read through numba's code library: where another numba version lays it out
    otherwise, this raises and ``build`` keeps the cfuncs) and its symbols, into one file at ``path``."""
    objects, entries, undefined = [], [], set()
    offset = 0
    for name, _ in lib.kernels:
        cf = cfuncs[name]
        code = cf._library.codegen._tm.emit_object(cf._library._final_module)  # numba's own target machine
        needs = undefined_symbols(code)
        if any(s.startswith(_ALLOCATES) for s in needs):
            raise ValueError(f"kernel {name} allocates through numba's runtime")
        undefined |= needs
        entries.append(
            {
                "name": name,
                "symbol": cf.native_name,
                "offset": offset,
                "size": len(code),
                "sha256": hashlib.sha256(code).hexdigest(),
            }
        )
        objects.append(code)
        offset += len(code)
    if _resolver().missing(undefined):
        raise ValueError(f"unresolved symbols {sorted(_resolver().missing(undefined))}")
    header = json.dumps({"format": _FORMAT, "kernels": entries, "undefined": sorted(undefined)}).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(header + b"\n" + b"".join(objects))
    os.replace(tmp, path)
    for stale in path.parent.glob(
        f"{lib.name}-*.native"
    ):  # the library's code before a change (or an upgrade)
        if stale != path:
            with contextlib.suppress(OSError):
                stale.unlink()


def _load_file(lib: Library, path: Path) -> Kernels | None:
    import llvmlite.binding as llvm

    data = path.read_bytes()
    cut = data.index(b"\n")
    header, body = json.loads(data[:cut]), memoryview(data)[cut + 1 :]
    entries = {e["name"]: e for e in header["kernels"]}
    if header.get("format") != _FORMAT or set(entries) != {name for name, _ in lib.kernels}:
        return None
    resolver = _resolver()
    if resolver.missing(header["undefined"]):
        return None
    resolver.register(header["undefined"])
    functions = {}
    for name, params in lib.kernels:
        e = entries[name]
        code = bytes(body[e["offset"] : e["offset"] + e["size"]])
        if hashlib.sha256(code).hexdigest() != e["sha256"]:
            return None
        engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), _target_machine())
        engine.add_object_file(llvm.ObjectFileRef.from_data(code))
        engine.finalize_object()
        address = engine.get_function_address(e["symbol"])
        if not address:
            return None
        _ENGINES.append(engine)
        functions[name] = (_ctypes_function(address, params), params)
    return Kernels(functions, native=True)


_TM: list[Any] = []


def _target_machine() -> Any:
    """llvmlite's target machine for this host, as numba's JIT makes it (llvmlite set up on first use)."""
    if not _TM:
        import llvmlite.binding as llvm

        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        target = llvm.Target.from_default_triple()
        features = llvm.get_host_cpu_features().flatten()
        _TM.append(
            target.create_target_machine(
                cpu=llvm.get_host_cpu_name(),
                features=features,
                opt=3,
                reloc="default",
                codemodel="jitdefault",
            )
        )
    return _TM[0]


# --- the symbols the code refers to --------------------------------------------------------------------------
class _Resolver:
    """Addresses of the symbols saved code may refer to: numba's C helpers and NRT functions (from their extension
    modules, as numba registers them with LLVM), else whatever the process has loaded (the Python C API, libc)."""

    def __init__(self) -> None:
        self.known: dict[str, int] = {}
        for module, pattern, prefix in (
            ("numba._helperlib", "_helperlib*.so", "numba_"),
            ("numba.core.runtime._nrt_python", "core/runtime/_nrt_python*.so", "NRT_"),
        ):
            with contextlib.suppress(Exception):
                helpers = _extension(module, pattern).c_helpers
                self.known.update({prefix + k: int(v) for k, v in helpers.items()})
        self._dlsym = ctypes.CDLL(None).dlsym
        self._dlsym.restype = ctypes.c_void_p
        self._dlsym.argtypes = [ctypes.c_void_p, ctypes.c_char_p]

    def address(self, name: str) -> int | None:
        return self.known.get(name) or self._dlsym(None, name.encode())

    def missing(self, names: Iterable[str]) -> set[str]:
        return {n for n in names if not self.address(n)}

    def register(self, names: Iterable[str]) -> None:
        import llvmlite.binding as llvm

        for n in names:
            if not llvm.address_of_symbol(n):
                llvm.add_symbol(n, self.address(n))


_RESOLVER: list[_Resolver] = []


def _resolver() -> _Resolver:
    if not _RESOLVER:
        _RESOLVER.append(_Resolver())
    return _RESOLVER[0]


def _extension(module: str, pattern: str) -> Any:
    """numba's extension module ``module`` loaded from its file on its own: its package (numba) is not imported;
    reused where numba has loaded it already."""
    if module in sys.modules:
        return sys.modules[module]
    path = sorted(glob.glob(str(_package_file("numba", pattern))))[0]
    loader = importlib.machinery.ExtensionFileLoader(module, path)
    spec = importlib.util.spec_from_file_location(module, path, loader=loader)
    ext = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    loader.exec_module(ext)
    return ext


def undefined_symbols(code: bytes) -> set[str]:
    """The names an ELF-64 little-endian object file refers to without defining them (its symbol table's entries
    in no section)."""
    if code[:4] != b"\x7fELF" or code[4] != 2 or code[5] != 1:
        raise ValueError("not an ELF-64 little-endian object")
    (shoff,) = struct.unpack_from("<Q", code, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", code, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", code, shoff + i * shentsize) for i in range(shnum)]
    out = set()
    for _, kind, _, _, offset, size, link, _, _, entsize in sections:
        if kind != 2:  # SHT_SYMTAB
            continue
        strtab = sections[link]
        names = code[strtab[4] : strtab[4] + strtab[5]]
        for at in range(offset + entsize, offset + size, entsize):  # entry 0 is the null symbol
            name_at, _, _, shndx, _, _ = struct.unpack_from("<IBBHQQ", code, at)
            if shndx == 0 and name_at:
                out.add(names[name_at : names.index(b"\0", name_at)].decode())
    return out
