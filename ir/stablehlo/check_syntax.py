"""Rewrite the StableHLO test suite's ``check`` dialect ops into MLIR's generic op form.

jaxlib ships no ``check`` dialect, so the custom assembly used by the interpreter test vectors
(``check.expect_eq_const %0, dense<[1, 2]> : tensor<2xi32>``) does not parse. In generic form
(``"check.expect_eq_const"(%0) {value = dense<[1, 2]> : tensor<2xi32>} : (tensor<2xi32>) -> ()``)
the ops parse as unregistered operations, and the importer reads their operands and attributes.

Forms handled (from stablehlo/tests/CheckOps.td):

    check.expect_eq %a, %b : T
    check.expect_eq_const %a, dense<...> : T
    check.expect_almost_eq %a, %b[, tolerance = x] : T
    check.expect_almost_eq_const %a, dense<...> : T[, tolerance = x] [{tolerance = x : f64}]
    check.expect_close %a, %b, max_ulp_difference = n[, min_ulp_difference = m] : T, T
    check.expect_serialized_eq %a, probe_id = "p"[, iter = n] : T

An op that matches none of these is left as it is, so MLIR's parser reports it.
"""
from __future__ import annotations

import re
from typing import List, Optional, Tuple

_START = re.compile(r"^([ \t]*)check\.([a-z_]+)\b", re.M)
_VALUE = r"%[A-Za-z0-9_.$#-]+"
_NUM = r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)"
_OPENERS = {"<": ">", "[": "]", "(": ")", "{": "}"}
_CLOSERS = set(_OPENERS.values())


def _scan_op(text: str, pos: int) -> int:
    """End of a check op that starts at ``pos``: the first newline outside brackets that does
    not follow a comma or colon (long constants continue on the next lines)."""
    depth = 0
    i = pos
    n = len(text)
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            i = j + 1
            continue
        if c == "/" and text.startswith("//", i) and depth <= 0:  # a trailing comment
            return i
        if c == "-" and i + 1 < n and text[i + 1] == ">":  # an arrow is not a bracket
            i += 2
            continue
        if c in _OPENERS:
            depth += 1
        elif c in _CLOSERS:
            depth -= 1
        elif c == "\n" and depth <= 0 and not text[pos:i].rstrip().endswith((",", ":")):
            return i
        i += 1
    return n


def _split_top(s: str, sep: str) -> List[str]:
    """Split at ``sep`` where it is outside brackets and strings."""
    out, depth, cur, i = [], 0, [], 0
    while i < len(s):
        c = s[i]
        if c == '"':
            j = i + 1
            while j < len(s) and s[j] != '"':
                j += 2 if s[j] == "\\" else 1
            cur.append(s[i:j + 1])
            i = j + 1
            continue
        if c in _OPENERS:
            depth += 1
        elif c in _CLOSERS:
            depth -= 1
        if c == sep and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        i += 1
    out.append("".join(cur))
    return [x.strip() for x in out]


def _take_attr_dicts(body: str) -> Tuple[str, List[str]]:
    """Remove top-level ``{...}`` attribute dictionaries; return the rest and their contents."""
    dicts, out, depth, start = [], [], 0, None
    for i, c in enumerate(body):
        if c == "{" and depth == 0:
            start = i
        if c in _OPENERS:
            depth += 1
        elif c in _CLOSERS:
            depth -= 1
            if c == "}" and depth == 0 and start is not None:
                dicts.append(body[start + 1:i].strip())
                start = None
                continue
        if start is None and not (c == "}" and depth == 0):
            out.append(c)
    return "".join(out), [d for d in dicts if d]


def _keyword(item: str, name: str) -> Optional[str]:
    m = re.fullmatch(rf"{name}\s*=\s*(.+)", item.strip(), re.S)
    return m.group(1).strip() if m else None


def _generic(name: str, operands: List[str], types: List[str], attrs: List[str]) -> str:
    a = (" {" + ", ".join(attrs) + "}") if attrs else ""
    return f'"check.{name}"({", ".join(operands)}){a} : ({", ".join(types)}) -> ()'


def _rewrite_one(name: str, body: str) -> Optional[str]:
    body, dicts = _take_attr_dicts(body)
    extra = list(dicts)
    if name in ("expect_eq_const", "expect_almost_eq_const"):
        items = _split_top(body, ",")
        if len(items) < 2 or not re.fullmatch(_VALUE, items[0]):
            return None
        dense = _split_top(items[1], ":")
        if len(dense) != 2:
            return None
        value, ty = dense
        close_attrs = [f"value = {value} : {ty}"]
        for it in items[2:]:
            tol = _keyword(it, "tolerance")
            if tol is None or not re.fullmatch(_NUM, tol):
                return None
            close_attrs.append(f"tolerance = {tol} : f64")
        return _generic(name, [items[0]], [ty], close_attrs + extra)
    head, _, tys = body.rpartition(":") if name != "expect_close" else _close_split(body)
    if not head:
        return None
    items = _split_top(head, ",")
    types = _split_top(tys, ",")
    operands = [it for it in items if re.fullmatch(_VALUE, it)]
    rest = [it for it in items if not re.fullmatch(_VALUE, it)]
    attrs: List[str] = []
    for it in rest:
        m = re.fullmatch(r"([a-z_]+)\s*=\s*(.+)", it, re.S)
        if m is None:
            return None
        key, val = m.group(1), m.group(2).strip()
        if key == "tolerance" and re.fullmatch(_NUM, val):
            attrs.append(f"tolerance = {val} : f64")
        elif key in ("max_ulp_difference", "min_ulp_difference") and val.isdigit():
            attrs.append(f"{key} = {val} : ui64")
        elif key == "probe_id" and val.startswith('"'):
            attrs.append(f"probe_id = {val}")
        elif key == "iter" and val.isdigit():
            attrs.append(f"iteration = {val} : ui32")
        else:
            return None
    if name == "expect_serialized_eq" or len(types) == len(operands):
        pass
    elif len(types) == 1:
        types = types * len(operands)
    else:
        return None
    if len(types) != len(operands):
        return None
    return _generic(name, operands, types, attrs + extra)


def _close_split(body: str) -> Tuple[str, str, str]:
    """``expect_close`` prints ``: attr-dict T, T``; the first top-level colon separates."""
    parts = _split_top(body, ":")
    if len(parts) < 2:
        return "", "", ""
    return parts[0], ":", ":".join(parts[1:])


_GENERIC_PROPS = re.compile(r'("check\.[a-z_]+"\([^()]*\))\s*<\{(.*?)\}>', re.S)


def rewrite_check_ops(text: str) -> str:
    """Return ``text`` with every custom-form ``check.*`` op in generic form.

    Generic check ops that carry their attributes as properties (``<{value = ...}>``, as the
    testdata suite prints them) get them as a plain attribute dictionary instead: jaxlib's
    bindings do not show the properties of unregistered ops."""
    if "check." not in text:
        return text
    text = _GENERIC_PROPS.sub(lambda m: f"{m.group(1)} {{{m.group(2)}}}", text)
    out, last = [], 0
    for m in _START.finditer(text):
        if m.start() < last:
            continue
        end = _scan_op(text, m.end())
        while end > m.end() and text[end - 1] in " \t":  # keep the spacing before a comment
            end -= 1
        new = _rewrite_one(m.group(2), text[m.end():end].strip())
        if new is None:
            continue
        out.append(text[last:m.start()])
        out.append(m.group(1) + new)
        last = end
    out.append(text[last:])
    return "".join(out)
