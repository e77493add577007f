"""The wheel: the rule pack installs inside the package namespace (traceadvisor/rules), never as a top-level
``rules`` module, and every package folder of the source tree is in it."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent


def test_every_package_folder_is_listed():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "traceadvisor").rglob("__init__.py")}
    assert found | {"traceadvisor.rules"} == listed


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("wheel")
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        str(ROOT),
        "-w",
        str(out),
        "--no-deps",
        "--no-build-isolation",
        "-q",
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    (whl,) = out.glob("traceadvisor-*.whl")
    return zipfile.ZipFile(whl)


def test_wheel_has_no_top_level_rules_package(wheel):
    names = wheel.namelist()
    tops = {n.split("/", 1)[0] for n in names}
    assert tops == {"traceadvisor", next(t for t in tops if t.endswith(".dist-info"))}
    top_level = next(n for n in names if n.endswith("top_level.txt"))
    assert wheel.read(top_level).decode().split() == ["traceadvisor"]
    rules_in_repo = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "rules").rglob("*.py"))
    assert rules_in_repo and all(f"traceadvisor/{r}" in names for r in rules_in_repo)
    assert any(n.startswith("traceadvisor/report/templates/") for n in names)
