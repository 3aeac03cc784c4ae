"""The native interface of a CPU executable, shared by the code that emits it
(``backends/cpu/program.py``) and the runtime that calls it (``executable.py``).

- ``ENTRY`` ``hlo_run(void **inputs, void **outputs, void *arena, i64 nthreads)`` runs the
  whole program; ``PY_ENTRY`` ``hlo_run_py(tuple inputs, tuple outputs, arena, nthreads)`` reads
  the numpy arrays' data pointers straight from the Python objects first.
- ``POOL_PTR``: a global the loader sets to the process-wide pool's ``parallel_for``.
- ``HOST_CALL_PTR``: a global the runtime sets to its host-call dispatcher,
  ``i32 dispatch(i64 site, void **buffers)`` (operands then results of call site ``site``);
  a nonzero return (the callback raised) makes ``hlo_run`` return at once.
- ``RW_ANCHOR``: a writable global in every object (the loader's one-block memory manager keeps
  the GOT of external calls in its section).
- ``PY_TUPLE_ITEMS`` / ``NP_ARRAY_DATA``: CPython (64-bit, GIL build) object layout the fast
  entry uses: a tuple's items start 24 bytes in; a numpy array's data pointer is 16 bytes in.
  The runtime checks both against the running interpreter before it uses that entry.
"""
ENTRY = "hlo_run"
PY_ENTRY = "hlo_run_py"
POOL_PTR = "hlo_pool_ptr"
HOST_CALL_PTR = "hlo_host_call_ptr"
RW_ANCHOR = "hlo_rw_anchor"
PY_TUPLE_ITEMS = 24
NP_ARRAY_DATA = 16
