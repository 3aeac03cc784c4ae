"""From a traced function to something that runs, and back from disk: ``jit`` (``hlo.jit``,
``make_ir``), ``stages`` (``Lowered``, ``Compiled``), ``targets`` (``compile_module``: the one
dispatch to the passes and a backend), ``cache`` (the persistent compilation cache), ``saved``
(a ``Compiled`` as a ``.hlox`` payload, ``LoadedExecutable``), ``placement`` (``device_put``)
and ``stablehlo`` (``hlo.load_stablehlo``).

(Not named ``jit``: ``hlo.jit`` is the function.)
"""
