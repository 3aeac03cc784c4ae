"""Options of the optimization pipeline (``optimize(..., options=...)``), given as an ``Options``
or a plain dict of the same fields. Unknown names are an error, not silently ignored."""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any, FrozenSet, Optional, Tuple, Union

from hlo.ir.targets import INFO, info

MATMUL_PRECISIONS = ("highest", "tf32")  # hlo.config's matmul_precision values
# Other spellings accepted in option dicts (the jit front door says ``donated_args``).
ALIASES = {"donated_args": "donate_argnums"}


@dataclass
class Options:
    # Run the fusion passes (vertical, multi-output, horizontal). Off: every op is its own kernel.
    fusion: bool = True
    # Pass names (see ``hlo.passes.registry``) to leave out of the pipeline.
    disabled_passes: FrozenSet[str] = frozenset()
    # Parameters of main whose buffers the caller gives up; outputs may be written into them.
    donate_argnums: Tuple[int, ...] = ()
    # Verify the module after every pass that changed it (True), after every pass ("all": also
    # checks that a pass reporting no change left a valid module), or never (False).
    verify: Union[bool, str] = True
    # Regular expression on pass names: which passes' outputs a dump directory receives.
    dump_filter: Optional[str] = None
    # Constant folding makes no constant with more elements than this (splats excepted).
    constant_fold_limit: int = 1 << 16
    # Vertical fusion may copy a producer into several consumers when its per-element work is at
    # most this many cheap-op units (an expensive op counts EXPENSIVE_COST); 0 never duplicates.
    duplication_limit: int = 8
    # Vertical fusion makes no kernel whose per-element work passes this many cost units (an
    # expensive op counts EXPENSIVE_COST, 16; the seed workloads' biggest kernel: 90). LLVM's
    # time on one function grows faster than its size: 320 steps of tanh-and-scale in one
    # kernel (6,700 units) took 9.6 s to compile for the CPU, jax.jit 0.6 s.
    max_fusion_cost: int = 512
    # Width bounds, which keep compile time in proportion to a wide program's size (thousands of
    # stacked operands or outputs): a concatenate takes at most this many operands (pass
    # ``concat-split`` makes a tree of wider ones) and a kernel's concatenates at most this many
    # together (each element of a concatenate's kernel evaluates every operand) ...
    max_concat_operands: int = 64
    # ... and the fusion passes make no kernel with more outputs than this (a 300-output kernel
    # had taken LLVM 10 s).
    max_kernel_outputs: int = 64
    # Horizontal fusion merges independent kernels whose outputs have at most this many elements.
    horizontal_max_elements: int = 1 << 16
    # Fuse a row-wise normalization (layer norm, softmax) into the operand of a dot (the dot
    # kernel computes the operand rows while it packs them). None: the target's default
    # (on for cpu and interpreter, off for cuda).
    row_prologue: Optional[bool] = None
    # How float32 matrix products are computed on cuda: "highest" (full float32) or "tf32"
    # (TensorFloat-32 tensor cores); hlo.config's matmul_precision. The gemm planner
    # (hlo.backends.cuda.gemm.plan_dot's ``precision``) takes it; cpu and the interpreter ignore it.
    matmul_precision: str = "highest"
    # Merge matrix products that read the same LHS into one product and slices (pass
    # ``dot-merger``). None: the target's default (on for cuda, whose cuBLASLt runs one wide
    # product better than several narrow ones; off for cpu and interpreter).
    dot_merger: Optional[bool] = None
    # ... for products of at most this many result elements each (a larger one fills the GPU).
    dot_merger_max_elements: int = 1 << 22
    # Split the contraction of a product of few rows whose RHS streams from memory into this
    # many products, one a thread, summed after (pass ``dot-split-k``). None, 0 or 1: off. A
    # cpu compile gives its thread count (the CPU target's ``pass_options()``).
    dot_split_k: Optional[int] = None
    # ... only where each part's RHS has at least this many bytes (a cpu compile: 3/8 of a
    # core's L2, below which the RHS stays in cache from call to call).
    dot_split_k_min_rhs_bytes: Optional[int] = None
    # Unroll a while loop whose trip count is known before it runs into copies of its body
    # (pass ``while-unroll``, within its size bounds). None: the target's default (on for cuda,
    # where each step of a loop costs launches; off for cpu and interpreter).
    while_unroll: Optional[bool] = None
    # Rewrite convolutions as an im2col gather and one product, depthwise ones as a sum of taps
    # (pass ``conv-gemm``). None: the target's default (on for cpu, whose GEMM runs them 30-100x
    # faster than the convolution's elemental loop; off for the interpreter, the reference, and
    # cuda, which has its own convolution kernels).
    conv_products: Optional[bool] = None

    @classmethod
    def from_any(cls, x: Any) -> "Options":
        if x is None:
            return cls()
        if isinstance(x, cls):
            return dataclasses.replace(x)
        if dataclasses.is_dataclass(x) and not isinstance(x, type):
            x = {f.name: getattr(x, f.name) for f in dataclasses.fields(x)}
        if not isinstance(x, dict):
            raise TypeError(f"options must be an Options, a dataclass or a dict, got {type(x).__name__}")
        x = dict(x)
        for alias, name in ALIASES.items():
            if alias in x:
                if name in x and x[name] != x[alias]:
                    raise ValueError(f"options give both {name} and its alias {alias}")
                x[name] = x.pop(alias)
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(x) - known)
        if unknown:
            raise ValueError(f"unknown optimization option(s) {', '.join(unknown)} "
                             f"(known: {', '.join(sorted(known))})")
        o = cls(**x)
        o.normalize()
        return o

    def normalize(self) -> None:
        self.disabled_passes = frozenset(self.disabled_passes or ())
        if self.verify not in (True, False, "all"):
            raise ValueError(f"verify must be True, False or 'all', got {self.verify!r}")
        if isinstance(self.donate_argnums, int):
            self.donate_argnums = (self.donate_argnums,)
        self.donate_argnums = tuple(int(i) for i in (self.donate_argnums or ()))
        if self.matmul_precision not in MATMUL_PRECISIONS:
            raise ValueError(f"matmul_precision must be one of {', '.join(MATMUL_PRECISIONS)}, got "
                             f"{self.matmul_precision!r}")
        for name in ("dot_split_k", "dot_split_k_min_rhs_bytes"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
                raise ValueError(f"{name} must be None or a non-negative integer, got {v!r}")
        for name in ("max_concat_operands", "max_kernel_outputs"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 2:
                raise ValueError(f"{name} must be an integer of at least 2, got {v!r}")
        if self.dump_filter is not None:
            try:
                re.compile(self.dump_filter)
            except re.error as e:
                raise ValueError(f"dump_filter {self.dump_filter!r} is not a valid regular expression: {e}") from None

    def row_prologue_for(self, target: str) -> bool:
        if self.row_prologue is not None:
            return bool(self.row_prologue)
        return bool(target_defaults(target).get("row_prologue", False))

    def dot_merger_for(self, target: str) -> bool:
        if self.dot_merger is not None:
            return bool(self.dot_merger)
        return bool(target_defaults(target).get("dot_merger", False))

    def while_unroll_for(self, target: str) -> bool:
        if self.while_unroll is not None:
            return bool(self.while_unroll)
        return bool(target_defaults(target).get("while_unroll", False))

    def conv_products_for(self, target: str) -> bool:
        if self.conv_products is not None:
            return bool(self.conv_products)
        return bool(target_defaults(target).get("conv_products", False))

    def dot_split_k_for(self, target: str) -> Tuple[int, int]:
        """(parts, least bytes of a part's RHS) of pass ``dot-split-k`` on ``target``: off
        (parts 0) but on cpu, where the options give them (a compile takes them from the CPU
        target's ``pass_options()``: its thread count and 3/8 of a core's L2)."""
        if not info(target).machine_pass_options:
            return 0, 0
        return int(self.dot_split_k or 0), int(self.dot_split_k_min_rhs_bytes or 0)


def target_defaults(kind: str) -> dict:
    """What target ``kind`` changes from the defaults (``TargetInfo.pass_defaults``; a target's
    ``pass_options()``, ``hlo.runtime.target``, hands these out)."""
    t = INFO.get(kind)
    return dict(t.pass_defaults) if t is not None else {}


def check_target(target: str) -> str:
    return info(target).name


@dataclass
class PassConfig:
    """What a pass factory gets: the target, the options and the shared decision log."""

    target: str = "interpreter"
    options: Options = field(default_factory=Options)
    decisions: list = field(default_factory=list)
