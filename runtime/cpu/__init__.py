"""The CPU part of the runtime: the host as a target (``target``), linking object code into
the process (``loader``, ``elf``), the process-wide worker pool (``thread_pool``) and the BLAS's
thread count around calls (``blas_threads``)."""
