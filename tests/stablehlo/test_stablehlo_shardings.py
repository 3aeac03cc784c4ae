"""Sharding annotations (ir/sharding_attr.py) in the hlo text and in StableHLO, where they are
Shardy's attributes as jax.jit(f, in_shardings=...) writes them."""
import numpy as np
import pytest

from hlo.ir import parse_module, print_module
from hlo.ir.errors import ParseError
from hlo.ir.stablehlo import export_module, import_module
from hlo.ir.stablehlo.errors import UnsupportedError

ANNOTATED = """module @m

func @main(%arg0: f32[8,4] {sharding = "mesh<batch=2, model=2> [{batch}, {}]"}, %arg1: f32[4]) -> (f32[8,4] {sharding = "mesh<batch=2, model=2> [{}, {model, batch}]"}, f32[4]) {
  %0 = add(%arg0, %arg0) : f32[8,4]
  return(%0, %arg1)
}
"""


def test_text_round_trip():
    assert print_module(parse_module(ANNOTATED)) == ANNOTATED


@pytest.mark.parametrize("bad, message", [
    ('"mesh<batch=2> [{batch}]"', "has 1 dimensions for a value of rank 2"),
    ('"mesh<batch=2> [{x}, {}]"', "axis 'x' is not an axis of the mesh"),
    ('"mesh<batch=2> [{batch}, {batch}]"', "a mesh axis splits two dimensions"),
    ('"mesh<batch> [{}, {}]"', "expected an axis like batch=2"),
    ('"batch"', "expected a sharding like"),
])
def test_bad_annotations_are_parse_errors_at_the_attribute(bad, message):
    text = ANNOTATED.replace('"mesh<batch=2, model=2> [{batch}, {}]"', bad)
    with pytest.raises(ParseError, match=message) as e:
        parse_module(text)
    assert "3:40" in str(e.value)


def test_stablehlo_round_trip_is_shardy():
    out = export_module(parse_module(ANNOTATED), pretty=True)
    assert "mhlo.num_partitions = 4 : i32" in out
    assert 'sdy.mesh @mesh = <["batch"=2, "model"=2]>' in out
    assert '%arg0: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"batch"}, {}]>}' in out
    assert '-> (tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"model", "batch"}]>}' in out
    assert print_module(import_module(out)) == ANNOTATED
    assert print_module(import_module(export_module(parse_module(ANNOTATED)))) == ANNOTATED


def test_what_jax_jit_with_in_shardings_writes_imports():
    jax = pytest.importorskip("jax")
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P
    mesh = Mesh(np.array(jax.devices()[:1]).reshape(1, 1), ("batch", "model"))
    f = jax.jit(lambda x, y: x * 2 + y,
                in_shardings=(NamedSharding(mesh, P("batch")), NamedSharding(mesh, P(None, "model"))),
                out_shardings=NamedSharding(mesh, P("batch", None)))
    text = f.lower(np.ones((4, 6), np.float32), np.ones((4, 6), np.float32)).as_text()
    if "sdy.sharding" not in text:
        pytest.skip("this jax writes no Shardy attributes")
    fn = import_module(text)["main"]
    assert {i: s.text() for i, s in fn.arg_shardings.items()} == {
        0: "mesh<batch=1, model=1> [{batch}, {}]", 1: "mesh<batch=1, model=1> [{}, {model}]"}
    assert fn.result_shardings[0].text() == "mesh<batch=1, model=1> [{batch}, {}]"


def test_shardy_forms_hlo_does_not_hold_are_refused():
    text = ANNOTATED.replace("{model, batch}", "{model}")
    out = export_module(parse_module(text), pretty=True).replace(
        '[{}, {"model"}]>', '[{}, {"model"}], replicated={"batch"}>')
    with pytest.raises(UnsupportedError, match="explicit replicated"):
        import_module(out)


def test_a_lowered_sharded_program_partitions_the_same_after_a_stablehlo_round_trip(monkeypatch):
    import hlo
    import hlo.numpy as hnp
    from hlo.passes.inline import Inline
    from hlo.passes.spmd_partitioner import partition_annotated
    from hlo.runtime.cpu import devices as cpu_devices
    from hlo.sharding import Mesh, NamedSharding, P
    monkeypatch.setenv("HLO_CPU_DEVICES", "2")
    cpu_devices.reset()
    try:
        mesh = Mesh(hlo.devices("cpu")[:2], ("batch",))
        g = hlo.jit(lambda x, w: hnp.sum(hnp.tanh(x @ w), axis=0),
                    in_shardings=(NamedSharding(mesh, P("batch")), NamedSharding(mesh, P())))
        g(np.ones((8, 4), np.float32), np.ones((4, 3), np.float32))
    finally:
        cpu_devices.reset()
    back = import_module(export_module(parse_module(g.lowered_ir)))
    Inline().run(back)
    part, _, decisions = partition_annotated(back)
    # the same per-partition program (the import spells out empty dot_general attributes)
    ops = lambda m: [(op.name, [str(t) for t in op.result_types]) for op in m["main"].walk()]
    assert ops(part) == ops(parse_module(g.as_text()))
    assert [str(t) for t in part["main"].arg_types] == ["f32[4,4]", "f32[4,3]"]
    assert decisions == g.spmd_decisions and any("all_reduce" in d for d in decisions)
