"""The pass contract and the registry of passes.

A pass has a ``name`` and ``run(module) -> changed`` (True when it modified the module). It
may keep a text ``report()`` of what it decided (fusion decisions, a buffer plan) that the
pipeline writes into dumps. Passes are made by factories registered under their name, which
take a ``PassConfig`` (target, options, shared decision log); ``python -m hlo.opt
--passes=a,b`` and the per-target pipelines both build passes this way.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Set

from hlo.ir.core import Module

from .options import PassConfig


class Pass:
    """Base class of passes: subclasses set ``name`` and implement ``run``."""

    name: str = ""

    def run(self, module: Module) -> bool:
        raise NotImplementedError(f"pass {type(self).__name__} does not implement run()")

    def report(self) -> str:
        """Text that explains the last run (decisions, analyses); empty when there is none."""
        return ""

    def __repr__(self) -> str:
        return f"<pass {self.name}>"


class DecisionLog:
    """A pass's decision log: each line once, in order, with the pass's prefix."""

    def __init__(self, sink: list, prefix: str):
        self.sink = sink
        self.prefix = prefix
        self.seen: Set[str] = set()

    def __call__(self, line: str) -> None:
        if line not in self.seen:
            self.seen.add(line)
            self.sink.append(f"{self.prefix}: {line}" if self.prefix else line)


class MainPass(Pass):
    """A pass over ``@main`` that explains itself: ``run`` starts a fresh ``self.log`` (a
    ``DecisionLog`` whose lines are the pass's ``report()``), calls ``run_main(module)`` and,
    when ``decision_prefix`` is set, adds the logged lines to the pipeline's decision log
    (``Optimized.decisions``). A module without ``@main`` is left alone."""

    decision_prefix = ""

    def __init__(self, config: PassConfig = None):
        self.config = config or PassConfig()
        self.options = self.config.options
        self.lines: List[str] = []
        self.log = DecisionLog(self.lines, self.decision_prefix)

    def report(self) -> str:
        return "\n".join(self.lines)

    def run(self, module: Module) -> bool:
        if "main" not in module:
            return False
        self.lines = []
        self.log = DecisionLog(self.lines, self.decision_prefix)
        changed = self.run_main(module)
        if self.decision_prefix:
            self.config.decisions.extend(self.lines)
        return changed

    def run_main(self, module: Module) -> bool:
        raise NotImplementedError(f"pass {type(self).__name__} does not implement run_main()")


PassFactory = Callable[[PassConfig], Pass]
FACTORIES: Dict[str, PassFactory] = {}
DOCS: Dict[str, str] = {}


def register_pass(name: str, doc: str = ""):
    """Decorator registering a pass class (or a factory taking a PassConfig) under ``name``."""
    def deco(factory):
        if name in FACTORIES:
            raise ValueError(f"pass '{name}' is registered twice")
        FACTORIES[name] = factory
        DOCS[name] = doc or (factory.__doc__ or "").strip().split("\n")[0]
        return factory
    return deco
