"""Command-line tools: ``cli`` (the ``hlo`` command), ``opt`` (``python -m hlo.opt``: passes on
IR text) and the StableHLO conformance runner (``conformance``, ``python -m hlo.conformance``;
its worker processes: ``conformance_pool``; FileCheck expectations: ``conformance_filecheck``).
"""
