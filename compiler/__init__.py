"""hlo: a whole-program ahead-of-time compiler for array programs.

    import hlo, hlo.numpy as hnp

    @hlo.jit
    def f(x, w):
        return hlo.nn.gelu(x @ w)

    f(x, w)                         # traced, compiled for the default target, run
    f.lower(x, w).as_text()         # the traced IR;  .compile() -> Compiled
    hlo.make_ir(f)(x, w)            # the IR Module (like jax.make_jaxpr)
"""
__version__ = "0.1.0"

from . import config  # noqa: E402  (hlo.config.update(...), hlo.config.<setting>)
from . import errors, tree_util, dtypes  # noqa: E402
from .abstract import ShapeDtypeStruct  # noqa: E402
from .jit import jit, make_ir, JitFunction  # noqa: E402
from .stages import Lowered, Compiled  # noqa: E402
from .targets import TARGETS, default_target  # noqa: E402
from . import numpy, lax, nn  # noqa: E402
from . import random  # noqa: E402  (hlo.random: jax.random's bits on uint32[2] keys)

from .stablehlo_loader import load_stablehlo  # noqa: E402
from .autodiff import grad, value_and_grad, vjp, jvp  # noqa: E402
