"""The CPU part of the runtime: the host as a target (``target``), linking object code into
the process (``loader``, ``elf``), the CPU ``Executable`` (``executable``) and the counters of a
profiled build (``profile``), the process-wide worker pool (``thread_pool``) and the BLAS's
thread count around calls (``blas_threads``)."""
