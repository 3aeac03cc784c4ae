"""The native interface of a CPU executable, shared by the code that emits it
(``backends/cpu/entry.py``) and the runtime that calls it (``executable.py``,
``pycall.py``).

- ``ENTRY`` ``hlo_run(void **inputs, void **outputs, void *arena, i64 nthreads)`` runs the
  whole program; ``PY_ENTRY`` ``hlo_run_py(tuple inputs, tuple outputs, arena, nthreads)`` reads
  the numpy arrays' data pointers straight from the Python objects first.
- ``CALL_ENTRY`` ``PyObject *hlo_call_py(PyObject *self, PyObject *const *args, Py_ssize_t
  nargs)``: a CPython ``METH_FASTCALL`` function (emitted only for row-major signatures). The
  runtime wraps it into a builtin function object (``pycall.py``) whose ``self`` is the tuple
  ``(ctx, fallback, finish, ...)``: ``ctx`` an int64 numpy array laid out as the ``CTX_*``
  slots below, filled by the runtime in each process (every process-specific address: the C
  API functions it calls, numpy's ndarray type, the expected dtype descriptors, the arena).
  It checks each argument exactly (type is ndarray, descr is the expected one, ndim, every
  dimension, C-contiguous and aligned flags), the guard cell (``hlo.config`` unchanged since
  the callable was made, no trace active) and the arena (free); on any mismatch it returns
  ``fallback(*args)`` (the full Python path, with all its checks and errors). Otherwise it
  allocates the outputs: one whose ``CTX_DESCRS`` allocator slot (``ctx``'s last ``nout``
  slots) holds a callable by calling it with no arguments (``PyObject_Vectorcall``: the
  recycled-output pool's ``output_pool.allocator``; it must return an ndarray of the output's
  shape and dtype, else the call goes to ``fallback``; when it raises, the call returns NULL
  with its exception), any other with numpy's ``PyArray_NewFromDescr``. Then it runs
  ``hlo_run`` (releasing the GIL unless the program is tiny, decided when it is emitted),
  counts the hit in ``ctx`` and returns the output (``OUT_SINGLE``), a tuple of them
  (``OUT_TUPLE``) or ``finish(tuple)`` (``OUT_FINISH``). An allocation that fails releases
  the arena and the outputs made so far.
  Donation (``hlo.runtime.donation``): each input the program writes must also be writable
  and own its data, or view hlo's recycled-output memory (its ``base``'s type is the slot
  ``CTX_DESCRS + nin + 2 * nout``: ``output_pool._Block``), and its bytes must not overlap
  another input's; else the call goes to ``fallback``, which copies it and warns. An output
  that is a donated input's memory (the manifest's ``aliases``) is that input object itself
  (a new reference), not an allocation.
- ``POOL_PTR``: a global the loader sets to the process-wide pool's ``parallel_for``.
- ``HOST_CALL_PTR``: a global the runtime sets to its host-call dispatcher,
  ``i32 dispatch(i64 site, void **buffers)`` (operands then results of call site ``site``);
  a nonzero return (the callback raised) makes ``hlo_run`` return at once.
- ``PROFILE`` / ``PROFILE_SLOTS``: in a profiled build only, the counters (``i64[slots][2]``:
  nanoseconds and calls per timed step, the last slot the whole call) and their slot count
  (``backends/cpu/entry.py``); the runtime reads them (``Executable.profile``).
- ``TRACE`` / ``TRACE_NEXT`` / ``TRACE_CAP``: in a profiled build only, the event buffer
  (``i64[cap][4]``: tag, start and end nanoseconds of the monotonic clock, ``pthread_self``;
  the tag is the step's slot, with ``TRACE_CHUNK`` set for a chunk of a parallel kernel run by
  a worker), the number of events appended (past ``cap`` they are dropped) and the capacity;
  the runtime reads them (``Executable.trace_events``, ``hlo.runtime.cpu.trace``).
- ``RW_ANCHOR``: a writable global in every object (the loader's one-block memory manager keeps
  the GOT of external calls in its section).
- ``PY_TUPLE_ITEMS`` / ``PY_TYPE`` / ``NP_ARRAY_*``: CPython (64-bit, GIL build) and numpy
  object layout the native entries use: a tuple's items start 24 bytes in, every object's type
  is 8 bytes in; a numpy array's data pointer is at 16, ndim (int32) 24, dimensions 32,
  base 48, descr 56, flags (int32) 64. The runtime checks all of them against the running interpreter
  before it uses those entries (``pycall.available``), else calls go through Python.
"""
ENTRY = "hlo_run"
PY_ENTRY = "hlo_run_py"
CALL_ENTRY = "hlo_call_py"
POOL_PTR = "hlo_pool_ptr"
HOST_CALL_PTR = "hlo_host_call_ptr"
RW_ANCHOR = "hlo_rw_anchor"
PROFILE = "hlo_profile"
PROFILE_SLOTS = "hlo_profile_slots"
TRACE = "hlo_trace"
TRACE_NEXT = "hlo_trace_next"
TRACE_CAP = "hlo_trace_cap"
TRACE_CHUNK = 1 << 32  # an event's tag bit: one chunk of a parallel kernel, on its worker
PY_TYPE = 8
PY_TUPLE_ITEMS = 24
NP_ARRAY_DATA = 16
NP_ARRAY_NDIM = 24
NP_ARRAY_DIMS = 32
NP_ARRAY_BASE = 48
NP_ARRAY_DESCR = 56
NP_ARRAY_FLAGS = 64
NPY_C_CONTIGUOUS_ALIGNED = 0x1 | 0x100  # NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED
NPY_OWNDATA = 0x4
NPY_WRITEABLE = 0x400

# ``hlo_call_py``'s ``self`` tuple: its items
SELF_CTX, SELF_FALLBACK, SELF_FINISH = 0, 1, 2
# ``ctx``'s int64 slots
CTX_GUARD = 0          # address of the guard cell: int64[2] = (epoch, active traces)
CTX_EPOCH = 1          # the epoch the callable was made in (guard[0] must still equal it)
CTX_HITS = 2           # calls served natively (the runtime reads it for cache statistics)
CTX_ARENA = 3          # the callable's own arena (0: the program needs none)
CTX_ARENA_BUSY = 4     # 1 while a call uses the arena (another thread's call falls back)
CTX_NTHREADS = 5
CTX_OUT_MODE = 6       # OUT_SINGLE / OUT_TUPLE / OUT_FINISH
CTX_NDARRAY = 7        # &PyArray_Type
CTX_NEW_FROM_DESCR = 8  # PyArray_NewFromDescr
CTX_VECTORCALL = 9     # PyObject_Vectorcall
CTX_TUPLE_NEW = 10     # PyTuple_New
CTX_INCREF = 11        # Py_IncRef
CTX_DECREF = 12        # Py_DecRef
CTX_SAVE_THREAD = 13   # PyEval_SaveThread
CTX_RESTORE_THREAD = 14  # PyEval_RestoreThread
CTX_DESCRS = 15        # then one expected descr per input, then one per output, then per
                       # output its allocator (a callable of no arguments) or 0, then the type
                       # of hlo's recycled-output memory (donation: a base of that type is ours)
OUT_SINGLE, OUT_TUPLE, OUT_FINISH = 0, 1, 2
