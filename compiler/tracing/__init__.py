"""Tracing: abstract values (``abstract``), the tracer that records a Python function as IR
(``tracer``) and ``api_util`` (``api_function``: a function of the array libraries called
outside a trace compiles that one call, with the compiler ``hlo.jit`` registers).
"""
