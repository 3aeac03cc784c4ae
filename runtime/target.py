"""Target identity: one ``Target`` object per kind of machine code, owning everything that
says which machine a program is for, without any code generation (the load path imports it):

- ``kind`` (``"cpu"``, ``"cuda"``) and ``triple``;
- ``manifest_entry()``: the ``target`` object of a saved executable's manifest;
- ``check_loadable(entry, where)``: refuse (``TargetMismatchError``) code built for a machine
  this one cannot run, before anything is linked; the one check, used by the ``.hlox`` loader,
  the runtime's ``Executable`` and the compilation cache;
- ``key_parts()``: its parts of the compilation cache's key (``"machine"``, ``"environment"``);
- ``pass_options()``: the optimization options this target changes from the defaults.

``current(kind)`` is this process's target of a kind: ``hlo.runtime.<kind>.target.current()``,
``cpu.target.host()`` (the host CPU) or ``cuda.target.device_target()`` (the GPU named by
``HLO_CUDA_ARCH`` or found on the machine). The kinds are the compiled targets of
``hlo.ir.targets``.
"""
from __future__ import annotations

import abc
import importlib
from typing import Dict

from hlo.ir.targets import COMPILED as KINDS

from .hlox import TargetMismatchError


class Target(abc.ABC):
    """A target's identity; subclasses define ``kind`` and ``triple``."""

    kind: str
    triple: str

    @abc.abstractmethod
    def manifest_entry(self) -> dict:
        ...

    @abc.abstractmethod
    def check_loadable(self, entry: dict, where: str) -> None:
        ...

    @abc.abstractmethod
    def key_parts(self) -> Dict[str, str]:
        ...

    def pass_options(self) -> dict:
        return {}

    def describe(self) -> str:
        return f"{self.kind} {self.triple}"


def arch_os(triple: str):
    """(architecture, operating system) of an LLVM triple (``x86_64-unknown-linux-gnu``)."""
    parts = (triple or "").split("-")
    return parts[0], (parts[2] if len(parts) > 2 else "")


def current(kind: str) -> Target:
    """This process's target of ``kind``."""
    if kind in KINDS:
        return importlib.import_module(f"{__package__}.{kind}.target").current()
    raise ValueError(f"unknown target kind {kind!r} (known: {', '.join(KINDS)})")


def check_kind(entry: dict, where: str, loadable=KINDS) -> Target:
    """The current target of ``entry``'s kind, after refusing kinds this hlo cannot load."""
    kind = entry.get("kind", "cpu")
    if kind not in loadable:
        raise TargetMismatchError(
            f"{where} was compiled for target {kind!r}; this hlo loads executables for "
            f"{', '.join(repr(k) for k in loadable)} only. Compile the program for "
            "target='cpu' to run it here")
    return current(kind)
