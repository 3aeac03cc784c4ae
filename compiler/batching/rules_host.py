"""The batching rule of ``host_callback`` (``hlo.pure_callback``, ``hlo.debug.print``): the same
op on the batched operands (unbatched ones as they are), calling a new host function that the
original's ``vmap_method`` makes (``hlo.lax.callbacks.HostFunction.batched``); every result is
batched."""
from __future__ import annotations

from hlo.ir import callbacks as registry
from hlo.ir.types import TensorType, element_type

from ..autodiff import prims as P
from .table import batch_rule


@batch_rule(registry.OP_NAME)
def _host_callback(ctx, op, args, bat):
    host = registry.lookup(op.attrs["callback_id"]).batched(ctx.size, bat)
    cid = registry.register(host)
    rtypes = [TensorType(s, element_type(d)) for s, d in host.result_avals]
    outs = P.emit(op.name, args, {**op.attrs, "callback_id": cid}, result_types=rtypes)
    return outs, [True] * len(outs)
