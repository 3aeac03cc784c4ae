"""Tests whose expectations are FileCheck patterns over what the reference interpreter prints.

Some files of the interpreter suite hold no check ops: their RUN lines pipe
``stablehlo-translate --interpret [--interpreter-print-dense]`` into ``FileCheck %s
[--check-prefix=P]``, and ``// CHECK:`` comments spell out the printed results. The runner then
prints the results hlo computed the way the reference interpreter does (``render``; from
``Tensor::print`` and ``Element::print`` in stablehlo/reference, and MLIR's printing of
``DenseElementsAttr`` for ``--interpreter-print-dense``) and matches the chunk's own patterns
against that text (``FileCheck``), once per RUN line.

Only what these tests use is understood: RUN lines of exactly that form; the directives
``P:`` and ``P-NEXT:``, with or without ``{LITERAL}``; patterns without ``{{regex}}`` or
``[[variables]]`` (unless ``{LITERAL}``). Anything else raises ``Unsupported`` naming it, and a
float that MLIR would print in its shortest-round-trip form (not 7 significant digits) raises
``ValueError`` rather than guessing the spelling. Each chunk's patterns are matched against
that chunk's output alone (upstream matches the whole file's patterns against the whole
file's output, which lets a pattern skip into the next test: per chunk is stricter).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import ml_dtypes
import numpy as np

_RUN = re.compile(r"^//\s*RUN:(.*)$", re.M)
_OK_FLAGS = {"--interpret", "--split-input-file", "-split-input-file", "--interpreter-print-dense"}


class Unsupported(Exception):
    """A RUN line or directive outside what this module understands."""


@dataclass(frozen=True)
class Run:
    dense: bool  # --interpreter-print-dense
    prefix: str


@dataclass(frozen=True)
class Directive:
    next_line: bool
    pattern: str
    line: int  # in the file


def runs(file_text: str) -> List[Run]:
    """The FileCheck runs of a file's RUN lines ([] when none pipes the interpreter into
    FileCheck); Unsupported when a RUN line does something else as well."""
    out = []
    for m in _RUN.finditer(file_text):
        line = m.group(1).strip()
        if "FileCheck" not in line:
            continue
        parts = [p.strip() for p in line.split("|")]
        if len(parts) != 2:
            raise Unsupported(f"RUN line '{line}'")
        tool, fc = parts[0].split(), parts[1].split()
        if tool[:1] != ["stablehlo-translate"] or fc[:2] != ["FileCheck", "%s"]:
            raise Unsupported(f"RUN line '{line}'")
        flags = [t for t in tool[1:] if t != "%s"]
        if not set(flags) <= _OK_FLAGS or "--interpret" not in flags:
            raise Unsupported(f"RUN line '{line}'")
        prefix = "CHECK"
        rest = fc[2:]
        if rest[:1] and rest[0].startswith("--check-prefix="):
            prefix, rest = rest[0].split("=", 1)[1], rest[1:]
        elif rest[:1] == ["--check-prefix"] and len(rest) >= 2:
            prefix, rest = rest[1], rest[2:]
        if rest:
            raise Unsupported(f"RUN line '{line}'")
        out.append(Run("--interpreter-print-dense" in flags, prefix))
    return out


def directives(chunk: str, prefix: str, others: Sequence[str] = ()) -> List[Directive]:
    """The chunk's directives for ``prefix`` (its text keeps the file's line numbers);
    ``others`` are the other runs' prefixes, which may start with this one."""
    pat = re.compile(r"(?<![\w-])" + re.escape(prefix) + r"(-[A-Z]+(?:-\d+)?)?(\{LITERAL\})?:(.*)$")
    out = []
    for no, text in enumerate(chunk.split("\n"), start=1):
        c = text.find("//")
        m = pat.search(text, c) if c >= 0 else None
        if m is None:
            continue
        suffix, literal, body = m.group(1), m.group(2), m.group(3).strip()
        if suffix is not None and prefix + suffix in others:
            continue
        if suffix not in (None, "-NEXT"):
            raise Unsupported(f"FileCheck directive {prefix}{suffix}")
        if not literal and ("{{" in body or "[[" in body):
            raise Unsupported(f"FileCheck pattern with regex or variables at line {no}")
        out.append(Directive(suffix == "-NEXT", body, no))
    return out


def filecheck(output: str, checks: Sequence[Directive], prefix: str) -> Optional[str]:
    """None when ``output`` matches ``checks`` in order (``P-NEXT`` on the line after the
    previous match; runs of spaces and tabs match any such run), else what did not match."""
    lines = [_canon(ln) for ln in output.split("\n")]
    row, col = 0, 0
    for d in checks:
        pattern = _canon(d.pattern)
        found = None
        for r in range(row, len(lines)):
            i = lines[r].find(pattern, col if r == row else 0)
            if i >= 0:
                found = (r, i)
                break
        kind = f"{prefix}{'-NEXT' if d.next_line else ''}"
        if found is None:
            return f"{kind} at line {d.line}: '{d.pattern}' not found after output line {row + 1}"
        if d.next_line and found[0] != row + 1:
            return (f"{kind} at line {d.line}: '{d.pattern}' is on output line {found[0] + 1}, "
                    f"not on the line after line {row + 1}")
        row, col = found[0], found[1] + len(pattern)
    return None


def _canon(s: str) -> str:
    return re.sub(r"[ \t]+", " ", s.strip())


# --------------------------------------------------------------------------------------------
# Printing values as the reference interpreter does
# --------------------------------------------------------------------------------------------

def render(values: Sequence[np.ndarray], types: Sequence[str], dense: bool) -> str:
    """The interpreter's output for results ``values`` of MLIR types ``types``."""
    out = []
    for v, t in zip(values, types):
        v = np.asarray(v)
        out.append(f"{_dense(v)} : {t}" if dense else t + " {" + _nested(v, (), 1) + "}")
    return "\n".join(out) + "\n"


def _nested(v: np.ndarray, idx: Tuple[int, ...], indent: int) -> str:
    """``Tensor::print``'s recursion: one bracketed line per innermost row."""
    shape = v.shape
    if len(idx) == len(shape):
        return _element(v[idx]) + ("" if _at_end(idx, shape) else ", ")
    s = "\n" + "  " * indent + "["
    for i in range(shape[len(idx)]):
        s += _nested(v, idx + (i,), indent + 1)
    s += "]"
    s += "\n" + "  " * (indent - 1) if _at_end(idx, shape) else ","
    return s


def _at_end(idx: Tuple[int, ...], shape) -> bool:
    return not idx or idx[-1] == shape[len(idx) - 1] - 1


def _element(x) -> str:
    x = np.asarray(x)
    if x.dtype.kind == "c":
        return f"[{float_text(x.real)}, {float_text(x.imag)}]"
    return _scalar(x)


def _scalar(x: np.ndarray) -> str:
    if x.dtype == np.bool_:
        return "true" if bool(x) else "false"
    if x.dtype.kind in "iu" or _is_int(x.dtype):
        return str(int(x))
    return float_text(x)


def _is_int(dt: np.dtype) -> bool:
    """ml_dtypes's 2- and 4-bit integers (numpy kind 'V')."""
    try:
        ml_dtypes.iinfo(dt)
    except (ValueError, TypeError):
        return False
    return True


def _dense(v: np.ndarray) -> str:
    """MLIR's ``DenseElementsAttr`` text: ``dense<>``, a splat, or nested lists."""
    if v.size == 0:
        return "dense<>"
    flat = v.reshape(-1)
    bits = np.ascontiguousarray(flat).view(np.uint8).reshape(flat.size, -1)
    if (bits == bits[0]).all():
        return f"dense<{_dense_elem(flat[0])}>"
    return f"dense<{_dense_list(v)}>"


def _dense_list(v: np.ndarray) -> str:
    if v.ndim == 0:
        return _dense_elem(v[()])
    return "[" + ", ".join(_dense_list(v[i]) for i in range(v.shape[0])) + "]"


def _dense_elem(x) -> str:
    x = np.asarray(x)
    if x.dtype.kind == "c":
        return f"({float_text(x.real)},{float_text(x.imag)})"
    return _scalar(x)


def float_text(x) -> str:
    """MLIR's spelling of a float: 7 significant digits when they read back to the same value,
    hexadecimal bits for NaN and infinities."""
    x = np.asarray(x)
    f = float(x.astype(np.float64))
    bits = int(x.reshape(1).view(f"u{x.dtype.itemsize}")[0])
    if not np.isfinite(f):
        return f"0x{bits:X}"
    s = "%.6e" % f
    if int(np.array([float(s)]).astype(x.dtype).view(f"u{x.dtype.itemsize}")[0]) == bits:
        return s
    raise ValueError(f"{f!r} ({x.dtype}) is not exact in 7 digits; hlo does not print MLIR's "
                     "shortest round-trip spelling")
