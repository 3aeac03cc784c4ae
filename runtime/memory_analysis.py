"""``MemoryAnalysis``: the byte counts of an executable's memory, one type for every source.

The passes compute it from a buffer plan (``hlo.passes.analysis.memory_analysis``); a saved
executable stores its fields and rebuilds it on load without importing the passes.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MemoryAnalysis:
    argument_size_in_bytes: int
    output_size_in_bytes: int
    temp_size_in_bytes: int
    alias_size_in_bytes: int
    constant_size_in_bytes: int

    def __str__(self) -> str:
        return (f"MemoryAnalysis(argument={self.argument_size_in_bytes}, output={self.output_size_in_bytes}, "
                f"temp={self.temp_size_in_bytes}, alias={self.alias_size_in_bytes}, "
                f"constant={self.constant_size_in_bytes})")
