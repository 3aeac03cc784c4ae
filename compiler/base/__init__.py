"""The frontend's base layer: source lines of the user's code (``source_info``), the API
boundary that trims hlo's frames from tracebacks (``boundary``), the input-signature check
(``signature``) and the cyclic collector held off while tracing and compiling (``gc_pause``).
The public base modules are ``hlo.config``, ``hlo.errors``, ``hlo.dtypes`` and ``hlo.tree_util``.
"""
