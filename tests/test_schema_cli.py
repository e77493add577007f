import json

from click.testing import CliRunner

from traceadvisor.cli.main import cli
from traceadvisor.schema.columns import COLUMNS, KINDS, arrow_schema


def test_schema_has_units_and_docs():
    s = arrow_schema()
    assert [f.name for f in s] == [c.name for c in COLUMNS]
    for f in s:
        assert f.metadata[b"unit"] and f.metadata[b"doc"]
    for required in (
        "kind",
        "category",
        "name",
        "rank",
        "pid",
        "tid",
        "device",
        "stream",
        "start_ns",
        "dur_ns",
        "correlation_id",
        "external_id",
        "bytes",
        "copy_kind",
        "src_memory",
        "dst_memory",
        "grid_x",
        "block_x",
        "registers",
        "shared_mem_bytes",
        "input_dims",
        "input_types",
        "args",
    ):
        assert required in s.names
    assert {
        "kernel",
        "memcpy",
        "memset",
        "runtime",
        "cpu_op",
        "annotation",
        "sync",
        "step",
        "python",
        "other",
    } <= set(KINDS)


def test_schema_command_json():
    r = CliRunner().invoke(cli, ["schema", "--json"])
    assert r.exit_code == 0
    cols = json.loads(r.output)
    assert cols[0]["name"] == "kind" and any(c["name"] == "start_ns" and c["unit"] == "ns" for c in cols)
