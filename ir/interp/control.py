"""Control flow and calls: ``while``, ``if``, ``case``, ``call`` and ``fusion``. Regions run in
the scope of the op, so they may read values defined around it."""
from __future__ import annotations

import numpy as np

from .registry import handler


@handler("while")
def _while(it, op, ins, env):
    cond, body = op.regions
    state = list(ins)
    while bool(it.eval_region(cond, state, env)[0]):
        state = it.eval_region(body, state, env)
    return state


@handler("if")
def _if(it, op, ins, env):
    branch = op.regions[0] if bool(ins[0]) else op.regions[1]
    return it.eval_region(branch, [], env)


@handler("case")
def _case(it, op, ins, env):
    i = int(ins[0])
    n = len(op.regions)
    if not 0 <= i < n:
        i = n - 1  # out-of-range index runs the last branch (spec)
    return it.eval_region(op.regions[i], [], env)


@handler("call")
def _call(it, op, ins, env):
    return it.call_by_name(op.attrs["callee"], ins)


@handler("fusion")
def _fusion(it, op, ins, env):
    return it.eval_region(op.regions[0], ins, env)


@handler("host_callback")
def _host_callback(it, op, ins, env):
    from ..callbacks import invoke  # the registered Python callable (hlo.ir.callbacks)
    return invoke(op.attrs["callback_id"], [np.array(a) for a in ins], op.result_types,
                  where=str(op.loc) if op.loc is not None else "")
