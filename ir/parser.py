"""Parser for the IR text form (see ``printer.py`` for the grammar by example).

Every problem is reported as a ``ParseError`` with a 1-based line and column and the offending
source line: lexical errors, unknown ops, undefined values, and also verifier errors of the
parsed module, which are mapped back to the line of the op that broke the rule.
"""
from __future__ import annotations

import re
from typing import Dict, List, Optional, Tuple

import ml_dtypes
import numpy as np

from . import ops as op_table
from .core import Function, Location, Module, Operation, Region, Value
from .dim_expr import DimExpr
from .errors import ParseError, VerifyError
from .nesting import call_with_stack_for_depth
from .sharding_attr import ShardingSyntaxError, ValueSharding, parse_sharding
from .types import BY_NAME, ElementType, TensorType
from .verifier import verify_module

_TOKEN_RE = re.compile(r"""
    (?P<ws>[ \t\r\n]+|//[^\n]*)
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<value>%[A-Za-z0-9_.$-]+)
  | (?P<symbol>@[A-Za-z0-9_.$-]+)
  | (?P<label>\^[A-Za-z0-9_.$-]+)
  | (?P<number>-?(?:0[xX][0-9a-fA-F]+|(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)))
  | (?P<ident>-?[A-Za-z_][A-Za-z0-9_.]*)
  | (?P<arrow>->)
  | (?P<punct>[()\[\]{}<>,:=*+-])
""", re.VERBOSE)


class Token:
    __slots__ = ("kind", "text", "line", "col")

    def __init__(self, kind, text, line, col):
        self.kind, self.text, self.line, self.col = kind, text, line, col

    def __repr__(self):
        return f"{self.kind}:{self.text!r}@{self.line}:{self.col}"


def tokenize(text: str) -> List[Token]:
    toks: List[Token] = []
    pos, line, line_start = 0, 1, 0
    lines = text.split("\n")
    while pos < len(text):
        m = _TOKEN_RE.match(text, pos)
        if m is None:
            col = pos - line_start + 1
            raise ParseError(f"unexpected character {text[pos]!r}", line, col, lines[line - 1])
        kind = m.lastgroup
        tok_text = m.group()
        if kind != "ws":
            toks.append(Token(kind, tok_text, line, pos - line_start + 1))
        nl = tok_text.count("\n")
        if nl:
            line += nl
            line_start = pos + tok_text.rfind("\n") + 1
        pos = m.end()
    toks.append(Token("eof", "", line, pos - line_start + 1))
    return toks


# Limits on nesting, checked before parsing (each names the line where the text passes it): a
# program's regions (control flow inside control flow) may nest MAX_NESTING deep, and the text
# is parsed on a thread with the stack for its depth (ir/nesting.py); attribute lists nest at
# most MAX_ATTR_NESTING deep (the op table's attributes are lists of lists at most) and dense
# literals at most MAX_DENSE_NESTING (one level per dimension).
MAX_NESTING = 4096
MAX_ATTR_NESTING = 16
MAX_DENSE_NESTING = 64
_OPEN = {"{": "}", "[": "]", "(": ")"}
_CLOSE = {"}", "]", ")"}


def _int(s: str) -> int:
    """An integer literal: decimal (leading zeros allowed) or 0x hex, with an optional sign."""
    neg = s.startswith("-")
    body = s[1:] if neg else s
    v = int(body[2:], 16) if body[:2].lower() == "0x" else int(body, 10)
    return -v if neg else v


def _unquote(s: str) -> str:
    body = s[1:-1]
    out, i = [], 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            n = body[i + 1]
            out.append({"n": "\n", "t": "\t"}.get(n, n))
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


class _DenseLiteral:
    """A parsed ``dense<...>`` body, turned into an array once its type is known."""

    def __init__(self, tok: Token, leaves: Optional[list], nested: bool, hexblob: Optional[str]):
        self.tok, self.leaves, self.nested, self.hexblob = tok, leaves, nested, hexblob


class Parser:
    def __init__(self, text: str, filename: str = "<text>"):
        self.text = text
        self.lines = text.split("\n")
        self.toks = tokenize(text)
        self.i = 0
        self.op_pos: Dict[int, Tuple[int, int]] = {}  # id(op) -> (line, col)

    def nesting_depth(self) -> int:
        """The deepest nesting of brackets, braces and parentheses in the text (a region adds
        one level: its op's ``{``); ParseError at the first token past MAX_NESTING."""
        depth = deepest = 0
        for t in self.toks:
            if t.kind != "punct":
                continue
            if t.text in _OPEN:
                depth += 1
                if depth > deepest:
                    deepest = depth
                    if depth > MAX_NESTING:
                        raise self.error(f"nested more than {MAX_NESTING} deep (brackets, braces "
                                         f"or regions {depth} levels deep here); hlo reads at "
                                         f"most {MAX_NESTING} levels", t)
            elif t.text in _CLOSE and depth:
                depth -= 1
        return deepest

    # -- token helpers ------------------------------------------------------------------------
    @property
    def tok(self) -> Token:
        return self.toks[self.i]

    def error(self, msg: str, tok: Optional[Token] = None) -> ParseError:
        t = tok or self.tok
        src = self.lines[t.line - 1] if 0 < t.line <= len(self.lines) else ""
        return ParseError(msg, t.line, t.col, src)

    def _what(self, t: Token) -> str:
        return "end of input" if t.kind == "eof" else repr(t.text)

    def next(self) -> Token:
        t = self.tok
        if t.kind != "eof":
            self.i += 1
        return t

    def at(self, text: str) -> bool:
        return self.tok.text == text and self.tok.kind in ("punct", "arrow", "ident")

    def accept(self, text: str) -> bool:
        if self.at(text):
            self.i += 1
            return True
        return False

    def expect(self, text: str, context: str = "") -> Token:
        if not self.at(text):
            ctx = f" {context}" if context else ""
            raise self.error(f"expected '{text}'{ctx}, found {self._what(self.tok)}")
        return self.next()

    def expect_kind(self, kind: str, what: str) -> Token:
        if self.tok.kind != kind:
            raise self.error(f"expected {what}, found {self._what(self.tok)}")
        return self.next()

    def int_tok(self, what="an integer") -> int:
        t = self.tok
        if t.kind != "number" or not re.fullmatch(r"-?(0[xX][0-9a-fA-F]+|\d+)", t.text):
            raise self.error(f"expected {what}, found {self._what(t)}")
        self.next()
        return _int(t.text)

    def dim_tok(self):
        """A dimension: an integer, or a symbolic expression (``b``, ``2*b``, ``b-1``,
        ``floordiv(b,2)``: ``ir/dim_expr.py``) read up to the ``,`` or ``]`` that ends it."""
        t = self.tok
        if t.kind == "eof":
            raise self.error(f"expected a dimension size, found {self._what(t)}")
        nxt = self.toks[self.i + 1]
        if t.kind == "number" and nxt.text in (",", "]"):
            return self.int_tok("a dimension size")
        depth, j = 0, self.i
        while True:
            u = self.toks[j]
            if u.kind == "eof" or (depth == 0 and u.text in (",", "]")):
                break
            if u.text == "(":
                depth += 1
            elif u.text == ")":
                depth -= 1
            elif u.kind not in ("number", "ident", "punct") or u.text in ("[", "{", "}", "<", ">", ":", "="):
                raise self.error(f"expected a dimension size, found {self._what(u)}", u)
            j += 1
        if j == self.i:
            raise self.error(f"expected a dimension size, found {self._what(t)}")
        text = "".join(u.text for u in self.toks[self.i:j])
        from .dim_expr import DimParseError, parse
        try:
            d = parse(text)
        except (DimParseError, ZeroDivisionError) as e:
            raise self.error(f"bad dimension {text!r}: {e}", t) from None
        self.i = j
        return d

    # -- types --------------------------------------------------------------------------------
    def parse_type(self) -> TensorType:
        t = self.tok
        if t.kind != "ident" or t.text not in BY_NAME:
            raise self.error(f"expected a tensor type like f32[4,8], found {self._what(t)}")
        self.next()
        et = BY_NAME[t.text]
        self.expect("[", "after the element type")
        dims = []
        if not self.at("]"):
            dims.append(self.dim_tok())
            while self.accept(","):
                dims.append(self.dim_tok())
        self.expect("]", "to close the shape")
        layout = None
        if self.at("{") and self.toks[self.i + 1].kind == "number":
            self.next()
            layout = [self.int_tok("a layout dimension")]
            while self.accept(","):
                layout.append(self.int_tok("a layout dimension"))
            self.expect("}", "to close the layout")
        if any(not isinstance(d, DimExpr) and d < 0 for d in dims):
            raise self.error("negative dimension size", t)
        try:
            return TensorType(tuple(dims), et, None if layout is None else tuple(layout))
        except ValueError as e:
            raise self.error(str(e), t) from None

    def parse_type_list(self) -> List[TensorType]:
        if self.at("(") and self.toks[self.i + 1].text == ")":
            self.next(); self.next()
            return []
        ts = [self.parse_type()]
        while self.accept(","):
            ts.append(self.parse_type())
        return ts

    # -- attributes ---------------------------------------------------------------------------
    def parse_dense_body(self) -> _DenseLiteral:
        start = self.expect("dense")
        self.expect("<", "after 'dense'")
        if self.tok.kind == "string":
            s = _unquote(self.next().text)
            if not s.startswith("0x"):
                raise self.error("a hex constant must start with 0x", start)
            self.expect(">", "to close 'dense<'")
            return _DenseLiteral(start, None, True, s[2:])
        leaves: list = []
        nested = self.at("[")
        self._dense_elems(leaves)
        self.expect(">", "to close 'dense<'")
        return _DenseLiteral(start, leaves, nested, None)

    def _dense_elems(self, leaves, depth=0):
        if self.at("[") and depth >= MAX_DENSE_NESTING:
            raise self.error(f"a dense literal nested more than {MAX_DENSE_NESTING} deep "
                             "(one level per dimension)")
        if self.accept("["):
            if not self.at("]"):
                self._dense_elems(leaves, depth + 1)
                while self.accept(","):
                    self._dense_elems(leaves, depth + 1)
            self.expect("]", "in a dense literal")
            return
        t = self.tok
        if self.accept("("):  # a complex element: (re, im)
            re_ = self._dense_leaf()
            self.expect(",", "between the parts of a complex number")
            im = self._dense_leaf()
            self.expect(")", "to close a complex number")
            leaves.append((t, re_, im))
            return
        leaves.append(self._dense_leaf())

    def _dense_leaf(self):
        t = self.tok
        if t.kind in ("number", "ident") and (t.kind == "number" or t.text in ("true", "false", "nan", "inf", "-inf", "-nan")):
            self.next()
            return t
        raise self.error(f"expected a number in a dense literal, found {self._what(t)}")

    def dense_to_array(self, lit: _DenseLiteral, ty: TensorType) -> np.ndarray:
        try:
            return self._dense_to_array(lit, ty)
        except (MemoryError, ValueError, OverflowError) as e:  # a shape numpy cannot allocate
            raise self.error(f"cannot make a constant of type {ty}: {e}", lit.tok) from None

    def _dense_to_array(self, lit: _DenseLiteral, ty: TensorType) -> np.ndarray:
        et = ty.dtype
        if lit.hexblob is not None:
            try:
                raw = bytes.fromhex(lit.hexblob)
            except ValueError:
                raise self.error("malformed hex constant", lit.tok) from None
            store = np.uint8 if et.is_pred else et.np_dtype
            if len(raw) != ty.size * np.dtype(store).itemsize:
                raise self.error(f"hex constant has {len(raw)} bytes, {ty} needs {ty.size * np.dtype(store).itemsize}", lit.tok)
            return np.frombuffer(raw, dtype=store).astype(et.np_dtype).reshape(ty.shape).copy()
        vals = [self._scalar(t, et) for t in lit.leaves]
        if not lit.nested and len(vals) == 1:
            return np.full(ty.shape, vals[0], dtype=et.np_dtype)
        if len(vals) != ty.size:
            raise self.error(f"dense literal has {len(vals)} elements, {ty} needs {ty.size}", lit.tok)
        return np.array(vals, dtype=et.np_dtype).reshape(ty.shape) if vals else np.zeros(ty.shape, et.np_dtype)

    def _scalar(self, t, et: ElementType):
        if et.is_complex:
            if not isinstance(t, tuple):
                raise self.error(f"expected a complex number (re, im) for {et}, found {t.text!r}", t)
            c = et.component
            return complex(self._scalar(t[1], c), self._scalar(t[2], c))
        if isinstance(t, tuple):
            raise self.error(f"a complex number (re, im) is not a {et}", t[0])
        s = t.text
        if et.is_pred:
            if s in ("true", "1"):
                return True
            if s in ("false", "0"):
                return False
            raise self.error(f"expected true or false for pred, found {s!r}", t)
        if et.is_int:
            try:
                v = _int(s)
            except ValueError:
                raise self.error(f"expected an integer for {et}, found {s!r}", t) from None
            info = ml_dtypes.iinfo(et.np_dtype)
            if not info.min <= v <= info.max:
                raise self.error(f"{v} does not fit in {et}", t)
            return v
        if s.lower().lstrip("-").startswith("0x"):
            neg = s.startswith("-")
            bits = int(s.lstrip("-"), 16)
            if bits >= 1 << (8 * et.itemsize):
                raise self.error(f"bit pattern {s} is wider than {et}", t)
            v = np.array(bits, dtype=f"u{et.itemsize}").view(et.np_dtype)[()]
            return -v if neg else v
        try:
            return np.array(float(s), dtype=np.float64).astype(et.np_dtype)[()] if et.name != "f64" else float(s)
        except ValueError:
            raise self.error(f"expected a number for {et}, found {s!r}", t) from None

    def parse_attr_value(self, depth=0):
        t = self.tok
        if t.kind == "string":
            self.next()
            return _unquote(t.text)
        if t.kind == "number":
            self.next()
            if re.fullmatch(r"-?(0[xX][0-9a-fA-F]+|\d+)", t.text):
                return _int(t.text)
            return float(t.text)
        if t.kind == "ident":
            if t.text in ("true", "false"):
                self.next()
                return t.text == "true"
            if t.text in ("nan", "inf", "-inf"):
                self.next()
                return float(t.text)
            if t.text == "dense":
                lit = self.parse_dense_body()
                self.expect(":", "and a type after a dense attribute")
                ty = self.parse_type()
                return self.dense_to_array(lit, ty)
        if self.at("("):  # a symbolic size: (d0-1) (ir/dim_expr.py)
            j, depth_p = self.i, 0
            while True:
                u = self.toks[j]
                if u.kind == "eof":
                    raise self.error("unclosed '(' in an attribute", t)
                depth_p += 1 if u.text == "(" else -1 if u.text == ")" else 0
                j += 1
                if depth_p == 0:
                    break
            text = "".join(u.text for u in self.toks[self.i + 1:j - 1])
            from .dim_expr import DimParseError, parse
            try:
                d = parse(text)
            except (DimParseError, ZeroDivisionError) as e:
                raise self.error(f"bad dimension {text!r}: {e}", t) from None
            self.i = j
            return d
        if self.at("[") and depth >= MAX_ATTR_NESTING:
            raise self.error(f"an attribute list nested more than {MAX_ATTR_NESTING} deep")
        if self.accept("["):
            items = []
            if not self.at("]"):
                items.append(self.parse_attr_value(depth + 1))
                while self.accept(","):
                    items.append(self.parse_attr_value(depth + 1))
            self.expect("]", "to close a list attribute")
            return items
        raise self.error(f"expected an attribute value, found {self._what(t)}")

    def parse_attr_dict(self) -> Dict[str, object]:
        attrs: Dict[str, object] = {}
        self.expect("{")
        if self.accept("}"):
            return attrs
        while True:
            name = self.expect_kind("ident", "an attribute name")
            if name.text in attrs:
                raise self.error(f"attribute '{name.text}' given twice", name)
            self.expect("=", "after an attribute name")
            v = self.parse_attr_value()
            attrs[name.text] = _freeze(v)
            if self.accept("}"):
                return attrs
            self.expect(",", "or '}' in the attribute list")

    def parse_loc(self) -> Optional[Location]:
        if not self.at("loc"):
            return None
        self.next()
        self.expect("(", "after 'loc'")
        f = _unquote(self.expect_kind("string", "a quoted file name").text)
        line = 0
        if self.accept(":"):
            line = self.int_tok("a line number")
        self.expect(")", "to close loc(...)")
        return Location(f, line)

    # -- ops and regions ----------------------------------------------------------------------
    def lookup(self, scope: List[Dict[str, Value]], tok: Token) -> Value:
        for s in reversed(scope):
            if tok.text in s:
                return s[tok.text]
        raise self.error(f"use of undefined value {tok.text}", tok)

    def define(self, scope: List[Dict[str, Value]], tok: Token, v: Value) -> None:
        for s in scope:
            if tok.text in s:
                raise self.error(f"value {tok.text} is defined twice", tok)
        scope[-1][tok.text] = v

    def parse_region_body(self, region: Region, scope: List[Dict[str, Value]], end_at_brace: bool) -> None:
        """Ops up to and including ``return(...)``."""
        while True:
            t = self.tok
            if t.kind == "ident" and t.text == "return":
                self.next()
                self.expect("(", "after 'return'")
                outs = []
                if not self.at(")"):
                    outs.append(self.lookup(scope, self.expect_kind("value", "a value")))
                    while self.accept(","):
                        outs.append(self.lookup(scope, self.expect_kind("value", "a value")))
                self.expect(")", "to close return(...)")
                region.outputs = outs
                return
            if t.kind == "eof":
                raise self.error("unexpected end of input: missing 'return(...)' and '}'")
            if t.kind == "punct" and t.text == "}":
                raise self.error("region ends without 'return(...)'")
            op = self.parse_op(scope)
            region.append(op)

    def parse_op(self, scope: List[Dict[str, Value]]) -> Operation:
        start = self.tok
        result_names: List[Token] = []
        if self.tok.kind == "value":
            result_names.append(self.next())
            while self.accept(","):
                result_names.append(self.expect_kind("value", "a result name"))
            self.expect("=", "after the result names")
        name_tok = self.expect_kind("ident", "an op name")
        name = name_tok.text
        if name not in op_table.OPS:
            raise self.error(f"unknown op '{name}'", name_tok)
        operands: List[Value] = []
        attrs: Dict[str, object] = {}
        dense = None
        if name == "constant" and self.at("dense"):
            dense = self.parse_dense_body()
        else:
            self.expect("(", f"after op name '{name}'")
            if not self.at(")"):
                operands.append(self.lookup(scope, self.expect_kind("value", "an operand")))
                while self.accept(","):
                    operands.append(self.lookup(scope, self.expect_kind("value", "an operand")))
            self.expect(")", "to close the operand list")
            if self.at("{"):
                attrs = self.parse_attr_dict()
        self.expect(":", "before the result types")
        rtypes = self.parse_type_list()
        if len(rtypes) != len(result_names):
            raise self.error(f"'{name}' names {len(result_names)} result(s) but gives {len(rtypes)} type(s)", name_tok)
        if dense is not None:
            if len(rtypes) != 1:
                raise self.error("constant has exactly one result", name_tok)
            attrs["value"] = self.dense_to_array(dense, rtypes[0])
        loc = self.parse_loc()
        regions: List[Region] = []
        if self.accept("{"):
            while not self.accept("}"):
                lab = self.expect_kind("label", "a region label like ^body(...)")
                r = Region(name=lab.text[1:])
                scope.append({})
                self.expect("(", "after the region label")
                if not self.at(")"):
                    self._region_arg(r, scope)
                    while self.accept(","):
                        self._region_arg(r, scope)
                self.expect(")", "to close the region arguments")
                self.expect(":", "after the region arguments")
                self.parse_region_body(r, scope, True)
                scope.pop()
                regions.append(r)
        op = Operation(name, operands, attrs, rtypes, regions, loc)
        self.op_pos[id(op)] = (start.line, start.col)
        for tok, v in zip(result_names, op.results):
            self.define(scope, tok, v)
        return op

    def _region_arg(self, r: Region, scope):
        t = self.expect_kind("value", "a region argument")
        self.expect(":", "after a region argument")
        self.define(scope, t, r.add_arg(self.parse_type()))

    def _sharding(self, t: TensorType) -> ValueSharding:
        tok = self.expect_kind("string", "a quoted sharding like \"mesh<batch=2> [{batch}]\"")
        try:
            sh = parse_sharding(_unquote(tok.text))
            sh.check_rank(t.rank)
        except ShardingSyntaxError as e:
            raise self.error(str(e), tok) from None
        return sh

    def parse_function(self, module: Module) -> Tuple[Function, Token]:
        self.expect("func", "to start a function")
        vis = "public"
        if self.accept("private"):
            vis = "private"
        elif self.accept("public"):
            pass
        name = self.expect_kind("symbol", "a function name like @main")
        self.expect("(", "after the function name")
        params: List[Tuple[Token, TensorType]] = []
        dim_args: Dict[int, str] = {}
        arg_sh: Dict[int, ValueSharding] = {}
        res_sh: Dict[int, ValueSharding] = {}
        if not self.at(")"):
            while True:
                t = self.expect_kind("value", "a parameter name")
                self.expect(":", "after a parameter name")
                params.append((t, self.parse_type()))
                if self.at("{") and self.toks[self.i + 1].text in ("dim", "sharding"):
                    self.next()
                    while True:
                        key = self.next()
                        self.expect("=", f"after '{key.text}'")
                        if key.text == "dim":
                            sym = self.tok
                            if sym.kind != "ident" or sym.text.startswith("-") or "." in sym.text:
                                raise self.error(f"expected a dimension symbol, found {self._what(sym)}")
                            self.next()
                            dim_args[len(params) - 1] = sym.text
                        elif key.text == "sharding":
                            arg_sh[len(params) - 1] = self._sharding(params[-1][1])
                        else:
                            raise self.error(f"expected 'dim' or 'sharding', found {self._what(key)}", key)
                        if not self.accept(","):
                            break
                    self.expect("}", "to close the argument's attributes")
                if not self.accept(","):
                    break
        self.expect(")", "to close the parameter list")
        self.expect("->", "and the result types")
        self.expect("(", "to open the result types")
        rtypes: List[TensorType] = []
        while not self.at(")"):
            rtypes.append(self.parse_type())
            if self.at("{") and self.toks[self.i + 1].text == "sharding":
                self.next(); self.next()
                self.expect("=", "after 'sharding'")
                res_sh[len(rtypes) - 1] = self._sharding(rtypes[-1])
                self.expect("}", "to close the result's attributes")
            if not self.accept(","):
                break
        self.expect(")", "to close the result types")
        loc = self.parse_loc()
        fn = Function(name.text[1:], [t for _, t in params], vis, loc)
        fn.dim_args = dim_args
        fn.arg_shardings, fn.result_shardings = arg_sh, res_sh
        scope: List[Dict[str, Value]] = [{}]
        for (t, _), a in zip(params, fn.args):
            self.define(scope, t, a)
        self.expect("{", "to open the function body")
        self.parse_region_body(fn.body, scope, True)
        self.expect("}", "to close the function body")
        got = [t.without_layout() for t in fn.result_types]
        if got != [t.without_layout() for t in rtypes]:
            raise self.error(f"@{fn.name} declares results ({', '.join(map(str, rtypes))}) but returns "
                             f"({', '.join(map(str, got))})", name)
        if name.text[1:] in module:
            raise self.error(f"function {name.text} is defined twice", name)
        module.add(fn)
        return fn, name

    def parse_module(self) -> Module:
        name = "module"
        if self.accept("module"):
            name = self.expect_kind("symbol", "a module name like @m").text[1:]
        m = Module(name)
        fn_pos = {}
        while self.tok.kind != "eof":
            fn, tok = self.parse_function(m)
            fn_pos[fn.name] = tok
        try:
            verify_module(m)
        except VerifyError as e:
            pos = self.op_pos.get(id(e.op)) if e.op is not None else None
            if pos is not None:
                line, col = pos
                raise ParseError(str(e), line, col, self.lines[line - 1]) from None
            raise ParseError(str(e), 1, 1, self.lines[0] if self.lines else "") from None
        return m


def _freeze(v):
    """Attribute lists parse as lists; store them as tuples like the op table normalizes them."""
    if isinstance(v, list):
        return tuple(_freeze(x) for x in v)
    return v


def parse_module(text: str, filename: str = "<text>") -> Module:
    """Parse and verify a module's text form. Raises ParseError (with line and column). A text
    nested deeper than MAX_NESTING is refused; a deep one is parsed (and verified) on a thread
    with the stack its depth needs."""
    parser = Parser(text, filename)
    return call_with_stack_for_depth(parser.nesting_depth(), parser.parse_module)


def parse_function_text(text: str) -> Module:
    return parse_module(text)
