"""Malformed IR text: every problem is a ParseError with the right line and column (and never
another exception type, checked by fuzzing valid text with truncations and mutations)."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ir_gen import build_module

from hlo.ir import ParseError, parse_module, print_module

GOOD = """module @example

func @main(%arg0: f32[4,8], %arg1: f32[8]) -> (f32[4]) {
  %0 = broadcast_in_dim(%arg1) {broadcast_dimensions = [1]} : f32[4,8] loc("model.py":3)
  %1 = add(%arg0, %0) : f32[4,8] loc("model.py":3)
  %2 = constant dense<0.0> : f32[]
  %3 = reduce(%1, %2) {dimensions = [1]} : f32[4] {
    ^body(%4: f32[], %5: f32[]):
      %6 = add(%4, %5) : f32[]
      return(%6)
  }
  return(%3)
}
"""


def test_good_text_parses():
    assert print_module(parse_module(GOOD)) == GOOD


def _bad(old, new):
    assert old in GOOD
    return GOOD.replace(old, new, 1)


# (name, text, where the error must point: (anchor, which occurrence), message regex)
CASES = [
    ("unknown op", _bad("%1 = add(", "%1 = frobnicate("), ("frobnicate", 0), r"unknown op 'frobnicate'"),
    ("undefined value", _bad("add(%arg0, %0)", "add(%arg0, %9)"), ("%9", 0), r"undefined value %9"),
    ("wrong result type", _bad("%1 = add(%arg0, %0) : f32[4,8]", "%1 = add(%arg0, %0) : f64[4,8]"),
     ("%1 = add", 0), r"'add' \(operands: f32\[4,8\], f32\[4,8\]\) at model.py:3: result type\(s\) f64\[4,8\] do not match"),
    ("operand types differ", _bad("add(%arg0, %0)", "add(%arg0, %arg1)"), ("%1 = add", 0),
     r"'add' \(operands: f32\[4,8\], f32\[8\]\).*same type"),
    ("unknown element type", _bad("%arg1: f32[8]", "%arg1: f31[8]"), ("f31", 0), r"expected a tensor type"),
    ("bad attribute list", _bad("{broadcast_dimensions = [1]}", "{broadcast_dimensions = [1}"), ("} : f32[4,8]", 0),
     r"expected '\]'"),
    ("unknown attribute", _bad("{broadcast_dimensions = [1]}", "{broadcast_dims = [1]}"), ("%0 =", 0),
     r"unknown attribute 'broadcast_dims'"),
    ("attribute of the wrong kind", _bad("{broadcast_dimensions = [1]}", '{broadcast_dimensions = "x"}'), ("%0 =", 0),
     r"attribute 'broadcast_dimensions': expected a list of integers"),
    ("missing attribute", _bad(" {dimensions = [1]}", ""), ("%3 = reduce", 0), r"missing attribute 'dimensions'"),
    ("dense count", _bad("dense<0.0> : f32[]", "dense<[1.0, 2.0]> : f32[3]"), ("dense<[", 0),
     r"dense literal has 2 elements, f32\[3\] needs 3"),
    ("dense unclosed", _bad("dense<0.0> : f32[]", "dense<[1.0, 2.0> : f32[2]"), ("> : f32[2]", 0), r"expected '\]'"),
    ("dense int overflow", _bad("dense<0.0> : f32[]", "dense<300> : s8[]"), ("300", 0), r"300 does not fit in s8"),
    ("dense bool for float", _bad("dense<0.0> : f32[]", "dense<true> : f32[]"), ("true", 0), r"expected a number for f32"),
    ("dense hex size", _bad("dense<0.0> : f32[]", 'dense<"0x0000"> : f32[]'), ('dense<"', 0), r"hex constant has 2 bytes"),
    ("dense bad hex", _bad("dense<0.0> : f32[]", 'dense<"0xZZZZZZZZ"> : f32[]'), ('dense<"', 0), r"malformed hex"),
    ("dense text in int", _bad("dense<0.0> : f32[]", "dense<1.5> : s32[]"), ("1.5", 0), r"expected an integer for s32"),
    ("result count", _bad("%1 = add(%arg0, %0) : f32[4,8]", "%1 = add(%arg0, %0) : f32[4,8], f32[4,8]"), ("add(%arg0", 0),
     r"names 1 result\(s\) but gives 2"),
    ("redefined value", _bad("%2 = constant", "%1 = constant"), ("%1 = constant", 0), r"value %1 is defined twice"),
    ("declared results differ", _bad("-> (f32[4])", "-> (f32[5])"), ("@main", 0), r"declares results \(f32\[5\]\) but returns"),
    ("missing return", _bad("  return(%3)\n", ""), ("}\n", -1), r"region ends without 'return"),
    ("bad character", _bad("%2 = constant", "%2 = constant ~"), ("~", 0), r"unexpected character '~'"),
    ("negative dim", _bad("%arg1: f32[8]", "%arg1: f32[-8]"), ("f32[-8]", 0), r"negative dimension"),
    ("bad layout", _bad("%arg0: f32[4,8]", "%arg0: f32[4,8]{0,0}"), ("f32[4,8]{0,0}", 0), r"layout"),
    ("bad loc", _bad('loc("model.py":3)\n  %1', 'loc(model.py:3)\n  %1'), ("model.py:3)", 0), r"quoted file name"),
    ("duplicate function", GOOD + "\nfunc @main() -> () {\n  return()\n}\n", ("@main", -1), r"function @main is defined twice"),
    ("unknown callee", _bad("  return(%3)", "  %7 = call(%3) {callee = \"nope\"} : f32[4]\n  return(%3)"), ("%7 = call", 0),
     r"calls unknown function @nope"),
    ("inner op error", _bad("^body(%4: f32[], %5: f32[])", "^body(%4: f32[], %5: f32[2])"), ("%6 = add", 0),
     r"'add' \(operands: f32\[\], f32\[2\]\): operands must have the same type"),
    ("region signature", _bad("^body(%4: f32[], %5: f32[])", "^body(%4: f32[], %5: f32[], %9: f32[])"), ("%3 = reduce", 0),
     r"'reduce' \(operands: f32\[4,8\], f32\[\]\): body must take 2 scalar arguments"),
]


def _position(text, anchor, nth):
    starts = [i for i in range(len(text)) if text.startswith(anchor, i)]
    i = starts[nth]
    line = text.count("\n", 0, i) + 1
    return line, i - (text.rfind("\n", 0, i) + 1) + 1


@pytest.mark.parametrize("text,where,msg", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_parse_error_position_and_message(text, where, msg):
    line, col = _position(text, *where)
    with pytest.raises(ParseError) as e:
        parse_module(text)
    assert (e.value.line, e.value.column) == (line, col), str(e.value)
    import re
    assert re.search(msg, str(e.value)), str(e.value)
    # the message shows the offending line and a caret under the column
    lines = str(e.value).split("\n")
    assert lines[0].startswith(f"{line}:{col}: error: ")
    assert lines[1].strip() == text.split("\n")[line - 1].strip()
    assert lines[2].index("^") - 2 == col - 1


def test_empty_text_is_an_empty_module():
    assert list(parse_module("").functions) == []


@pytest.mark.parametrize("cut", range(0, len(GOOD), 7))
def test_truncated_text_is_a_parse_error(cut):
    text = GOOD[:cut]
    try:
        parse_module(text)
    except ParseError as e:
        assert 1 <= e.line <= text.count("\n") + 1
    else:
        assert text.strip() in ("", "module @example", "module @exampl", "module @examp") or \
            text.strip().startswith("module @")


@st.composite
def mutated(draw):
    m = build_module(draw)
    text = print_module(m)
    for _ in range(draw(st.integers(1, 3))):
        if not text:
            break
        i = draw(st.integers(0, len(text) - 1))
        how = draw(st.sampled_from(["delete", "insert", "replace", "truncate"]))
        ch = draw(st.sampled_from(list("()[]{}<>,:=%@^\"-0123456789.xeE abcfs\n")))
        if how == "delete":
            text = text[:i] + text[i + 1:]
        elif how == "insert":
            text = text[:i] + ch + text[i:]
        elif how == "replace":
            text = text[:i] + ch + text[i + 1:]
        else:
            text = text[:i]
    return text


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(mutated())
def test_mutated_text_raises_only_parse_errors(text):
    try:
        m = parse_module(text)
    except ParseError as e:
        assert 1 <= e.line <= text.count("\n") + 1
        assert e.column >= 1
    else:
        assert print_module(parse_module(print_module(m))) == print_module(m)


@pytest.mark.parametrize("ty, match, where", [
    ("f32[100000000000]", "cannot make a constant", (2, 17)),
    # past a 64-bit index: the type itself is refused, where it first appears
    ("f32[99999999999999999999]", "too large: dimension 0", (1, 18)),
    ("f32[4294967296,4294967296]", "too large: dimension 1", (1, 18))])
def test_constant_too_large_is_a_parse_error(ty, match, where):
    text = f"func @main() -> ({ty}) {{\n  %0 = constant dense<0.0> : {ty}\n  return(%0)\n}}\n"
    with pytest.raises(ParseError, match=match) as e:
        parse_module(text)
    assert (e.value.line, e.value.column) == where


def test_integer_literals_with_leading_zeros():
    m = parse_module("func @main() -> (s32[02]) {\n  %0 = constant dense<[007, -01]> : s32[2]\n  return(%0)\n}\n")
    assert m.main.result_types[0].shape == (2,)
    assert m.main.body.ops[0].attrs["value"].tolist() == [7, -1]


def test_location_with_newline_roundtrips():
    import numpy as np

    from hlo.ir import Builder, Function, Location, Module
    m = Module("m")
    fn = m.add(Function("main", loc=Location('a\nb"c\\d.py', 3)))
    fn.body.outputs = [Builder(fn.body, Location("x\ty.py", 1)).value(
        "constant", attrs={"value": np.zeros(2, np.float32)})]
    text = print_module(m)
    again = parse_module(text)
    assert again.main.loc == fn.loc and print_module(again) == text
