"""Pictures of the fused program (``hlo.passes.graph_view``): ``as_text("dot")`` parses as DOT
(a small parser of the language below) and draws every kernel as a cluster of its ops with
values on its edges; ``as_text("html")`` is one self-contained page whose script runs (under
node, where there is one: no headless browser is assumed) and whose data match the program;
the dumps hold both."""
import json
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser

import numpy as np
import pytest

import hlo
import hlo.numpy as hnp
from hlo.ir import parse_module
from hlo.passes.graph_view import ProgramGraph, fusion_history, graph_of, to_dot, to_html


def _model(x, w):
    h = hnp.tanh(x @ w)
    s = hnp.sum(h, axis=1, keepdims=True)
    return hnp.exp(h - s) * 2.0, x.T


@pytest.fixture(scope="module")
def compiled():
    x, w = np.ones((8, 16), np.float32), np.ones((16, 4), np.float32)
    return hlo.jit(_model).lower(x, w).compile(target="cpu")


# -- a DOT parser (the grammar of graphviz.org/doc/info/lang.html, less ports and HTML labels) --

_TOKEN = re.compile(r'\s*(?:(//[^\n]*)|("(?:[^"\\]|\\.)*")|(->|--|[{}\[\];,=])|([A-Za-z_][\w.]*|-?\d+(?:\.\d+)?))', re.S)


def _tokens(text):
    pos, out = 0, []
    while True:
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            assert text[pos:].strip() == "", f"DOT: cannot read {text[pos:pos + 40]!r}"
            return out
        pos = m.end()
        if m.group(1):
            continue
        if m.group(2):
            # the lexer's escape is \"; \n and \\ are the label's line break and backslash
            out.append(("id", re.sub(r'\\(.)', lambda e: "\n" if e.group(1) == "n" else e.group(1),
                                     m.group(2)[1:-1])))
        elif m.group(3):
            out.append((m.group(3), m.group(3)))
        else:
            out.append(("id", m.group(4)))


class Dot:
    """The parsed graph: nodes (id -> attrs, cluster path), edges (a, b, attrs), clusters
    (id -> attrs, parent)."""

    def __init__(self, text):
        self.t = _tokens(text)
        self.i = 0
        self.nodes, self.edges, self.clusters = {}, [], {}
        self.expect("id", "digraph")
        self.name = self.expect("id")
        self.block(None)
        assert self.i == len(self.t), "DOT: text after the graph"

    def peek(self):
        return self.t[self.i] if self.i < len(self.t) else (None, None)

    def expect(self, kind, value=None):
        k, v = self.peek()
        assert k == kind and (value is None or v == value), f"DOT: expected {value or kind}, got {v!r}"
        self.i += 1
        return v

    def attrs(self):
        out = {}
        if self.peek()[0] != "[":
            return out
        self.expect("[")
        while self.peek()[0] != "]":
            k = self.expect("id")
            self.expect("=")
            out[k] = self.expect("id")
            if self.peek()[0] in (",", ";"):
                self.i += 1
        self.expect("]")
        return out

    def block(self, cluster):
        self.expect("{")
        while self.peek()[0] != "}":
            k, v = self.peek()
            if k == "id" and v == "subgraph":
                self.i += 1
                sid = self.expect("id")
                self.clusters[sid] = {"parent": cluster, "attrs": {}}
                self.block(sid)
            elif k == "id" and v in ("graph", "node", "edge") and self.t[self.i + 1][0] == "[":
                self.i += 1
                self.attrs()
            else:
                a = self.expect("id")
                if self.peek()[0] == "=":
                    self.i += 1
                    val = self.expect("id")
                    if cluster is not None:
                        self.clusters[cluster]["attrs"][a] = val
                elif self.peek()[0] == "->":
                    self.i += 1
                    b = self.expect("id")
                    self.edges.append((a, b, self.attrs()))
                else:
                    assert a not in self.nodes, f"DOT: node {a} declared twice"
                    self.nodes[a] = {"attrs": self.attrs(), "cluster": cluster}
            if self.peek()[0] == ";":
                self.i += 1
        self.expect("}")


def test_dot_draws_each_kernel_as_a_cluster_of_its_ops(compiled):
    dot = Dot(compiled.as_text("dot"))
    m = compiled.ir
    # every edge joins declared nodes (Graphviz would invent a node for a misspelt one)
    for a, b, _ in dot.edges:
        assert a in dot.nodes and b in dot.nodes, (a, b)
    fusions = [op for op in m.main.walk() if op.name == "fusion"]
    assert len(dot.clusters) == len(fusions) >= 2  # a multi kernel of two nested fusions
    # each top-level fusion's cluster holds exactly its (non-fusion) ops
    for k, op in enumerate(m.main.ops):
        if op.name != "fusion":
            continue
        def ops_of(f):  # a fusion's ops, nested fusions' included (not a reduction's body)
            return sum(ops_of(o) if o.name == "fusion" else 1 for o in f.regions[0].ops)
        want = ops_of(op)

        def under(c):
            while c is not None:
                if c == f"cluster_k{k}":
                    return True
                c = dot.clusters[c]["parent"]
            return False
        assert sum(under(n["cluster"]) for n in dot.nodes.values()) == want
        label = dot.clusters[f"cluster_k{k}"]["attrs"]["label"]
        assert label.startswith(f"%{k} {op.attrs['name']}\n")  # named as the printed IR
        tip = dot.clusters[f"cluster_k{k}"]["attrs"]["tooltip"]
        me = os.path.basename(__file__)
        assert f"source: {me}:" in tip and "flops" in tip and "fusion: fused" in tip, tip
    # values on edges: the printed name, the type, the bytes and the buffer slice
    labels = [e[2].get("label", "") for e in dot.edges if "label" in e[2]]
    assert "%arg0 f32[8,16]{1,0} 512 B param0[0:512]" in labels, labels
    assert any(re.fullmatch(r"%0 f32\[8,4\]\{1,0\} 128 B (temp|output0)\[\d+:\d+\]", s) for s in labels), labels
    # the dot's result reaches the op inside the kernel that reads it (tanh), not the cluster
    (into,) = [b for a, b, at in dot.edges if a == "k0"]
    assert dot.nodes[into]["attrs"]["label"].startswith("%") and " tanh\n" in dot.nodes[into]["attrs"]["label"]


class _Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.refs, self.scripts, self.ids, self._in = [], [], [], [], None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append(tag)
        for k in ("src", "href", "xlink:href", "action", "data"):
            if k in a:
                self.refs.append(a[k])
        if tag == "g" and "data-id" in a:
            self.ids.append(a["data-id"])
        if tag == "script":
            self._in = a.get("type", "js")
            self.scripts.append([self._in, ""])

    def handle_endtag(self, tag):
        if tag == "script":
            self._in = None

    def handle_data(self, data):
        if self._in is not None:
            self.scripts[-1][1] += data


def test_html_is_self_contained_and_its_data_are_the_program(compiled):
    text = compiled.as_text("html")
    page = _Page()
    page.feed(text)
    assert not page.refs, page.refs   # nothing loaded: no src, href, link
    assert not {"link", "img", "iframe", "object", "embed"} & set(page.tags)
    assert re.findall(r"https?://[^\s\"']+", text) == ["http://www.w3.org/2000/svg"]  # a namespace
    assert "@import" not in text and "url(http" not in text
    (data,) = [json.loads(s) for kind, s in page.scripts if kind == "application/json"]
    kernels = [n for n in data["nodes"].values() if n["kind"] in ("fusion", "kernel", "control")]
    assert len(kernels) == compiled.cost_analysis()["kernels"]
    assert sum(1 for n in data["nodes"].values() if n["kind"] == "argument") == 2
    assert sorted(page.ids) == sorted(data["nodes"])  # one drawn box per node
    fused = next(n for n in kernels if n["kind"] == "fusion")
    assert fused["reasons"] and all(os.path.basename(__file__) in s for s in fused["lines"])
    assert any(" = tanh : f32[8,4]" in s for s in fused["ops"]), fused["ops"]


NODE_HARNESS = r"""
const html = require('fs').readFileSync(process.argv[1], 'utf8');
const script = html.match(/<script>([\s\S]*?)<\/script>/)[1];
const data = html.match(/<script type="application\/json" id="hlo-data">([\s\S]*?)<\/script>/)[1];
const viewBox = html.match(/viewBox="([^"]+)"/)[1];
function el(id) {
  const e = {id, children: [], attrs: {}, listeners: {}, classes: new Set(), textContent: '',
    classList: {toggle(c, on) { on ? e.classes.add(c) : e.classes.delete(c); }},
    appendChild(c) { this.children.push(c); }, set innerHTML(v) { this.children = []; },
    setAttribute(k, v) { this.attrs[k] = v; }, getAttribute(k) { return this.attrs[k]; },
    addEventListener(t, f) { this.listeners[t] = f; },
    getBoundingClientRect() { return {left: 0, top: 0, width: 400, height: 300}; }};
  return e;
}
const boxes = [...html.matchAll(/<g class="node [a-z]+" data-id="([^"]+)"/g)].map(m => {
  const g = el('g'); g.attrs['data-id'] = m[1]; return g; });
const els = {'hlo-data': el('hlo-data'), 'hlo-graph': el('hlo-graph'), 'hlo-details': el('hlo-details'),
             'hlo-search': el('hlo-search')};
els['hlo-data'].textContent = data.replace(/<\\\//g, '</');
els['hlo-graph'].attrs.viewBox = viewBox;
els['hlo-graph'].querySelectorAll = () => boxes;
global.document = {getElementById: id => els[id], createElement: tag => { const e = el(tag); e.tag = tag; return e; }};
global.window = {addEventListener() {}};
eval(script);
const pick = boxes.find(b => JSON.parse(els['hlo-data'].textContent).nodes[b.attrs['data-id']].kind === 'fusion');
els['hlo-graph'].listeners.click({target: {closest: () => pick}});
els['hlo-graph'].listeners.wheel({deltaY: 1, clientX: 200, clientY: 150, preventDefault() {}});
els['hlo-search'].listeners.input({target: {value: 'tanh'}});
console.log(JSON.stringify({
  shown: els['hlo-details'].children.map(c => [c.tag, c.textContent]),
  selected: boxes.filter(b => b.classes.has('selected')).map(b => b.attrs['data-id']),
  hits: boxes.filter(b => b.classes.has('hit')).map(b => b.attrs['data-id']),
  viewBox: els['hlo-graph'].attrs.viewBox, picked: pick.attrs['data-id']}));
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="no node here to run the page's script")
def test_the_pages_script_shows_a_kernel_zooms_and_searches(compiled, tmp_path):
    page = tmp_path / "graph.html"
    page.write_text(compiled.as_text("html"))
    p = subprocess.run(["node", "-e", NODE_HARNESS, str(page)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout)
    shown = dict((tag, text) for tag, text in got["shown"] if tag in ("h2",))
    assert re.fullmatch(r"%\d+ \w+_fusion\.\d+", shown["h2"]), got
    assert [t for tag, t in got["shown"] if tag == "h3"][:1] == ["ops"]
    assert got["selected"] == [got["picked"]]
    assert got["hits"] and got["picked"] in got["hits"]  # the kernel holding tanh
    assert got["viewBox"] != re.search(r'viewBox="([^"]+)"', page.read_text()).group(1)  # zoomed


def test_dumps_hold_the_graph_and_a_cached_executable_says_what_it_lacks(tmp_path):
    x, w = np.ones((8, 16), np.float32), np.ones((16, 4), np.float32)
    hlo.jit(_model).lower(x, w).compile(target="cpu", dump_dir=str(tmp_path))
    Dot((tmp_path / "graph.dot").read_text())
    assert (tmp_path / "graph.html").read_text().startswith("<!DOCTYPE html>")
    # without the pipeline's result (a cache hit, a loaded file): no slices, no reasons, said so
    m = parse_module((tmp_path / "optimized.hlo").read_text())
    g = graph_of(m, None)
    assert "no buffer slices or fusion decisions" in g.note
    dot = Dot(to_dot(g))
    assert all(not re.search(r"(temp|param\d|output\d)\[", e[2].get("label", "")) for e in dot.edges)
    assert g.note in to_html(g)


def test_fusion_history_follows_a_kernel_through_its_names():
    log = ["fusion: fused %3 exponential (m.py:1) into %4 add (m.py:2) -> loop_fusion.0 (loop fusion)",
           "fusion: fused %2 reduce (m.py:1) into loop_fusion.0 -> input_fusion.0 (input fusion)",
           "fusion: not fused: %1 dot_general (m.py:1) -> input_fusion.0: why",
           "fusion: fused %9 add (m.py:3) into %10 negate (m.py:3) -> loop_fusion.10 (loop fusion)",
           "horizontal: merged 2 independent kernels into one launch -> multi_fusion.0: "
           "%5 input_fusion.0 (m.py:2), %6 loop_fusion.1 (m.py:3)"]
    h = fusion_history(log)
    assert h["input_fusion.0"] == log[:3]
    assert h["loop_fusion.10"] == log[3:4]   # not loop_fusion.1's
    assert h["multi_fusion.0"] == log[:3] + log[4:]


def test_unknown_dialect_lists_the_pictures(compiled):
    with pytest.raises(ValueError, match="'dot' or 'html'"):
        compiled.as_text("svg")


def test_an_empty_program_and_a_loop_draw():
    m = parse_module("""
    func @main(%x: f32[4]) -> (f32[4], f32[4]) {
      %z = constant dense<0> : s32[]
      %i, %y = while(%z, %x) : s32[], f32[4] {
        ^cond(%c: s32[], %v: f32[4]):
          %n = constant dense<3> : s32[]
          %lt = compare(%c, %n) {comparison_direction = "LT"} : pred[]
          return(%lt)
        ^body(%k: s32[], %u: f32[4]):
          %one = constant dense<1> : s32[]
          %k1 = add(%k, %one) : s32[]
          %s = sine(%u) : f32[4]
          return(%k1, %s)
      }
      return(%y, %x)
    }
    """)
    g = ProgramGraph(m)
    loop = next(n for n in g.nodes if n.kind == "control")
    assert loop.title == "%1 while" and "5 ops in 2 regions, not drawn" in loop.subtitle
    dot = Dot(to_dot(g))
    assert ("arg0", "out1") in [(a, b) for a, b, _ in dot.edges]  # an argument returned as is
    _Page().feed(to_html(g))
