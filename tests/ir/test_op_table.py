"""The op table is complete: every op has an interpreter rule, a VJP rule (or a trait saying why
none is needed) and a lowering on every compiled target that exists. Adding an op and forgetting
one of them fails here, not silently later (an op left out of a category set used to stop
fusing without any error)."""
import importlib
import importlib.util

import pytest

from hlo.ir import ops
from hlo.ir.interp import HANDLERS
from hlo.ir.types import ALL_ELEMENT_TYPES


def test_every_trait_is_documented_used_and_checked():
    for name, doc in ops.TRAITS.items():
        assert doc, f"trait {name!r} has no description"
        assert ops.with_trait(name), f"no op has trait {name!r}"
    with pytest.raises(KeyError, match="unknown trait"):
        ops.with_trait("elementwize")
    with pytest.raises(ValueError, match="unknown traits"):
        ops.register(ops.OpDef("not_an_op", lambda ts, a, r: ts, 1, traits={"elementwize"}))
    assert "not_an_op" not in ops.OPS


def test_elementwise_arithmetic_ops_are_elementwise():
    arith = set(ops.UNARY_ELEMENTWISE) | set(ops.BINARY_ELEMENTWISE)
    assert arith <= ops.with_trait(ops.ELEMENTWISE)
    for name in arith:
        assert ops.OPS[name].element_types in ops.TYPE_CLASSES


def test_every_op_has_an_interpreter_rule():
    missing = sorted(set(ops.OPS) - set(HANDLERS))
    assert not missing, f"ops without an interpreter handler (ir/interp/): {missing}"


def test_commutative_ops_have_identities_and_the_interpreters_fast_paths():
    from hlo.ir.interp.regions import BOOL_UFUNCS, INT_UFUNCS
    for name in ops.with_trait(ops.COMMUTATIVE):
        d = ops.OPS[name]
        assert d.num_operands == 2 and d.element_types is not None, name
        assert name in INT_UFUNCS and name in BOOL_UFUNCS, \
            f"'{name}' is commutative but ir/interp/regions.py has no numpy ufunc for it"
        for et in ALL_ELEMENT_TYPES:
            if ops.TYPE_CLASSES[d.element_types](et):
                e = ops.identity(name, et)
                assert e is not None and e.dtype == et.np_dtype, (name, et)


def test_every_op_has_a_vjp_rule_or_a_trait_saying_why_not():
    from hlo.autodiff import RULES
    why_not = ops.with_trait(ops.NON_DIFFERENTIABLE, ops.NOT_TRACED)
    missing = sorted(set(ops.OPS) - set(RULES) - why_not)
    assert not missing, (f"ops without a VJP rule (compiler/autodiff/vjp_*.py) and without the "
                         f"non_differentiable or not_traced trait: {missing}")
    both = sorted(set(RULES) & ops.with_trait(ops.NON_DIFFERENTIABLE))
    assert not both, f"ops with a VJP rule that say they are non_differentiable: {both}"
    unknown = sorted(set(RULES) - set(ops.OPS))
    assert not unknown, f"VJP rules for ops the table does not have: {unknown}"


def compiled_targets():
    """The targets that compile code (``hlo.ir.targets.COMPILED``; tests/test_targets.py checks
    each has its backend, runtime, saved-file loader, cache key parts and packages)."""
    from hlo.ir.targets import COMPILED
    return list(COMPILED)


def test_the_cpu_backend_is_a_compiled_target():
    assert "cpu" in compiled_targets()


@pytest.mark.parametrize("target", compiled_targets())
def test_every_op_has_a_lowering_on_each_compiled_target(target):
    backend = importlib.import_module(f"hlo.backends.{target}")
    lowered_ops = getattr(backend, "lowered_ops", None)
    assert callable(lowered_ops), (f"hlo.backends.{target} must expose lowered_ops(), the ops it "
                                   "lowers read from its dispatch (docs/ARCHITECTURE.md)")
    lowered = lowered_ops()
    unknown = sorted(set(lowered) - set(ops.OPS))
    assert not unknown, f"{target} claims to lower ops the table does not have: {unknown}"
    # A target that cannot lower an op says why: ``declined_ops() -> {op name: reason}`` (read
    # from its KernelEmitter's DECLINED); compiling a program holding one is an error naming
    # the op's line (hlo.staging.targets.check_declined_ops).
    declined = getattr(backend, "declined_ops", dict)()
    assert all(isinstance(why, str) and why for why in declined.values()), declined
    assert not set(declined) & set(lowered), f"{target} both lowers and declines {set(declined) & set(lowered)}"
    missing = sorted(set(ops.OPS) - set(lowered) - set(declined))
    assert not missing, f"ops the {target} backend cannot lower (and gives no reason for): {missing}"


def test_the_cpu_declines_only_run_parallel():
    from hlo.backends import cpu
    assert set(cpu.declined_ops()) == {"run_parallel"}
    assert "host_callback" in cpu.lowered_ops()


def test_a_declined_op_is_left_out_of_lowered_ops_and_named_at_compile_time():
    from hlo.backends.kernel_emitter import KernelEmitter
    from hlo.backends.lower import Lowering
    assert "host_callback" in KernelEmitter.declined_ops()
    assert "host_callback" not in Lowering.own_lowerings(KernelEmitter)
    assert "while" in Lowering.own_lowerings(KernelEmitter)


def test_a_missing_scalar_lowering_is_noticed(monkeypatch):
    from hlo.backends import cpu, elemental, scalar_ops
    from hlo.backends.mathlib import CPU_MATH
    real = scalar_ops.binary

    def without_atan2(ctx, b, name, et, x, y):
        if name == "atan2":
            raise scalar_ops.UnsupportedOp("'atan2' is not implemented")
        return real(ctx, b, name, et, x, y)

    monkeypatch.setattr(scalar_ops, "binary", without_atan2)
    assert "atan2" not in elemental.elemental_ops(CPU_MATH)
    assert "atan2" not in cpu.lowered_ops()
    assert "power" in cpu.lowered_ops()


def test_a_missing_own_lowering_is_noticed(monkeypatch):
    from hlo.backends import cpu
    from hlo.backends.lower import Lowering
    monkeypatch.delattr(Lowering, "_lower_sort")
    assert "sort" not in cpu.lowered_ops()
    assert "scatter" in cpu.lowered_ops()
