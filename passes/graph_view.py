"""Pictures of an optimized program, as XLA writes ``.dot`` and HTML: ``to_dot`` (Graphviz) and
``to_html`` (one self-contained page: an SVG laid out here, a little inlined script for
details, zoom and pan; nothing fetched from the network, no Graphviz needed).

Both draw ``ProgramGraph``: ``@main``'s arguments, its top-level ops in schedule order and its
outputs. A fusion is a kernel: a Graphviz cluster of its ops (nested fusions of a ``multi``
kernel are nested clusters), a box listing its ops in the HTML. Each kernel carries its
FLOPs and the bytes it reads and writes (``analysis.op_flops``, the same count as
``cost_analysis``), the user's source lines of its ops, and the fusion decisions that made it
(the decision-log lines naming it, following the names it had while it grew: ``loop_fusion.0
-> input_fusion.0``). An edge is a value: its printed name (``%N``), type, bytes and, where
the buffer plan is known, its slice (``temp[0:128]``). Values are named as the printed
optimized IR names them (``hlo.ir.printer.value_names``).

Loops and conditionals are one node each (their bodies are programs of their own, not drawn);
a reduction's or sort's scalar body is part of its op.
"""
from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Sequence, Tuple

from hlo.ir.core import Module, Operation, Region, Value
from hlo.ir.printer import value_names

from .analysis import is_kernel, op_flops
from .util import inputs_of, nbytes

MAX_BOX_OPS = 14  # ops listed in a kernel's box in the HTML (all of them in its details)
# decision lines of a kernel in a tooltip / the page's details (a loop kernel that grew by a
# thousand merges has a thousand: the first and last are kept, the log has them all)
MAX_TIP_REASONS, MAX_PAGE_REASONS = 12, 200


def _some(lines: List[str], most: int) -> List[str]:
    if len(lines) <= most:
        return lines
    half = most // 2
    return lines[:half] + [f"... {len(lines) - 2 * half} more decisions (the decision log has "
                           "them all)"] + lines[-half:]


@dataclass
class OpLine:
    """One op inside a kernel: its printed name, what it is, its type and the user's line."""
    text: str
    loc: str
    depth: int = 0


@dataclass
class Node:
    id: str
    kind: str        # argument, output, kernel, fusion, bitcast, constant, control
    title: str       # "%1 input_fusion.0", "%arg0"
    subtitle: str    # "input fusion, 6 ops", "f32[8,16]"
    loc: str = ""
    ops: List[OpLine] = field(default_factory=list)
    lines: List[str] = field(default_factory=list)   # distinct user lines, first seen first
    flops: float = 0.0
    transcendentals: float = 0.0
    bytes_in: int = 0
    bytes_out: int = 0
    reasons: List[str] = field(default_factory=list)


@dataclass
class Edge:
    src: str
    dst: str
    value: str       # "%0"
    type: str        # "f32[8,4]"
    nbytes: int
    slice: str = ""  # "temp[0:128]" where the buffer plan is known
    # Graphviz endpoints inside clusters (an op of a fusion; the node itself otherwise)
    src_port: str = ""
    dst_ports: Tuple[str, ...] = ()

    def short_label(self) -> str:
        return f"{self.type.split('{')[0]} {_size(self.nbytes)}"

    def label(self) -> str:
        s = f"{self.value} {self.type} {_size(self.nbytes)}"
        return s + (f" {self.slice}" if self.slice else "")


def _first_port(items: List) -> str:
    """The first op node of a cluster's items (nested clusters searched in order)."""
    for it in items:
        if isinstance(it[1], OpLine):
            return it[0]
        inner = _first_port(it[2])
        if inner:
            return inner
    return ""


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"  # unreachable


_FUSION_NAME = re.compile(r"(?<![\w.])(\w+_fusion\.\d+)(?![\w.])")


def fusion_history(decisions: Sequence[str]) -> Dict[str, List[str]]:
    """For each fusion name, the decision lines about it and about the kernels it grew from:
    a line ``... -> Z`` gives ``Z`` the lines of every fusion it names (the lines kept in
    order, each once)."""
    hist: Dict[str, Dict[str, None]] = {}
    for line in decisions:
        names = list(dict.fromkeys(_FUSION_NAME.findall(line)))
        if not names:
            continue
        # "fused A into B -> Z", "merged ... -> Z" make Z; "not fused: A -> B: why" makes nothing
        declined = re.match(r"[\w-]+: not ", line) is not None
        made = None if declined else re.search(r" -> (\w+_fusion\.\d+)\b", line)
        if made:
            z = made.group(1)
            # a kernel growing under its own name keeps its lines (no copy); a new name starts
            # from the lines of the kernels it names (not those of an earlier kernel of that name)
            grew = z in _FUSION_NAME.findall(line[:made.start()])
            lines: Dict[str, None] = hist.get(z, {}) if grew else {}
            for n in names:
                if n != z:
                    for x in hist.get(n, ()):
                        lines[x] = None
            lines[line] = None
            hist[z] = lines
        else:
            for n in names:
                hist.setdefault(n, {})[line] = None
    return {k: list(v) for k, v in hist.items()}


class ProgramGraph:
    """The drawable program (see the module docstring). ``module``: the optimized module;
    ``buffers``: its ``BufferAssignment`` (or None: edges without slices); ``decisions``: the
    pipeline's decision log (or empty); ``note``: a line saying what is missing, if anything."""

    def __init__(self, module: Module, buffers=None, decisions: Sequence[str] = (), note: str = ""):
        self.name = module.name
        self.note = note
        main = module.main
        self.names = value_names(main)
        self.nodes: List[Node] = []
        self.edges: List[Edge] = []
        self.clusters: Dict[str, List] = {}   # node id -> nested [(port id, OpLine) | (cluster id, title, [...])]
        self.inner_edges: List[Tuple[str, str]] = []
        hist = fusion_history(decisions)
        slice_of = getattr(buffers, "slice_for", None)
        # value -> (node id, graphviz port)
        producer: Dict[Value, Tuple[str, str]] = {}
        for i, a in enumerate(main.args):
            nid = f"arg{i}"
            self.nodes.append(Node(nid, "argument", f"%arg{i}", str(a.type), bytes_out=nbytes(a.type)))
            producer[a] = (nid, nid)
        for k, op in enumerate(main.ops):
            nid = f"k{k}"
            node = self._node(nid, op, hist)
            self.nodes.append(node)
            in_ports: Dict[Value, Tuple[str, ...]] = {}
            out_ports: Dict[Value, str] = {}
            if op.name == "fusion":
                items = self._cluster(op, nid, in_ports, out_ports)
                if items:
                    self.clusters[nid] = items
                    anchor = _first_port(items)  # where a value no op inside reads enters
                    in_ports = {v: in_ports.get(v, (anchor,)) for v in inputs_of(op)}
                    out_ports = {r: out_ports.get(r, anchor) for r in op.results}
            for v in inputs_of(op):
                if v not in producer:
                    continue
                src, port = producer[v]
                self.edges.append(Edge(src, nid, self.names.get(v, "%?"), str(v.type), nbytes(v.type),
                                       self._slice(slice_of, v), port, in_ports.get(v, (nid,))))
            for r in op.results:
                producer[r] = (nid, out_ports.get(r, nid))
        for i, v in enumerate(main.body.outputs):
            nid = f"out{i}"
            self.nodes.append(Node(nid, "output", f"output {i}", str(v.type), bytes_in=nbytes(v.type)))
            if v in producer:
                src, port = producer[v]
                self.edges.append(Edge(src, nid, self.names.get(v, "%?"), str(v.type), nbytes(v.type),
                                       self._slice(slice_of, v), port, (nid,)))
        self.by_id = {n.id: n for n in self.nodes}

    @staticmethod
    def _slice(slice_of, v: Value) -> str:
        if slice_of is None:
            return ""
        try:
            return str(slice_of(v))
        except KeyError:
            return ""

    def _node(self, nid: str, op: Operation, hist: Dict[str, List[str]]) -> Node:
        names = self.names
        first = names.get(op.results[0], "%?") if op.results else ""
        results = ", ".join(str(r.type) for r in op.results)
        loc = str(op.loc) if op.loc is not None else ""
        if op.name == "fusion":
            fname = op.attrs.get("name", "fusion")
            kind = op.attrs.get("kind", "")
            node = Node(nid, "fusion", f"{first} {fname}", "", loc)
            self._list_ops(op.regions[0], node, 0)
            node.subtitle = f"{kind} fusion, {sum(1 for o in node.ops if not o.text.startswith('('))} ops -> {results}"
            node.reasons = list(hist.get(fname, ()))
        else:
            kind = ("constant" if op.name == "constant" else
                    "bitcast" if not is_kernel(op) else
                    "control" if op.name in ("while", "if", "case", "call") else "kernel")
            node = Node(nid, kind, f"{first} {op.name}" if first else op.name, results, loc)
            node.ops = [OpLine(f"{first} = {op.name} : {results}" if first else op.name, loc)]
            if kind == "control":
                inner = sum(1 for r in op.regions for _ in r.walk())
                node.subtitle = f"{results} ({inner} ops in {len(op.regions)} regions, not drawn)"
        node.lines = list(dict.fromkeys([o.loc for o in node.ops if o.loc] or ([loc] if loc else [])))
        if is_kernel(op):
            f = op_flops(op)
            node.flops, node.transcendentals = f["flops"], f["transcendentals"]
            node.bytes_in = sum(nbytes(v.type) for v in inputs_of(op))
            node.bytes_out = sum(nbytes(r.type) for r in op.results)
        return node

    def _list_ops(self, region: Region, node: Node, depth: int) -> None:
        for op in region.ops:
            if op.name == "fusion":
                node.ops.append(OpLine(f"({op.attrs.get('name', 'fusion')}: {op.attrs.get('kind', '')})",
                                       "", depth))
                self._list_ops(op.regions[0], node, depth + 1)
                continue
            first = self.names.get(op.results[0], "%?") if op.results else ""
            types = ", ".join(str(r.type) for r in op.results)
            node.ops.append(OpLine(f"{first} = {op.name} : {types}" if first else op.name,
                                   str(op.loc) if op.loc is not None else "", depth))

    def _cluster(self, op: Operation, cid: str, in_ports, out_ports) -> List:
        """The Graphviz cluster of a fusion: its ops as nodes (nested fusions as nested
        clusters) and edges inside; ``in_ports`` / ``out_ports`` get, for the fusion's operands
        and results, the nodes inside that read / compute them."""
        counter = [0]
        local: Dict[Value, str] = {}   # value inside -> port node computing it

        def build(fop: Operation, outer: Dict[Value, Tuple[str, ...]], cid: str) -> List:
            region = fop.regions[0]
            items: List = []
            readers: Dict[Value, List[str]] = {}
            arg_src = dict(zip(region.args, fop.operands))
            for inner in region.ops:
                if inner.name == "fusion":
                    sub_in: Dict[Value, Tuple[str, ...]] = {}
                    sid = f"{cid}_{counter[0]}"
                    counter[0] += 1
                    items.append((sid, f"{inner.attrs.get('name', 'fusion')} ({inner.attrs.get('kind', '')})",
                                  build(inner, sub_in, sid)))
                    for v, ports in sub_in.items():
                        readers.setdefault(v, []).extend(ports)
                    for r, out in zip(inner.results, inner.regions[0].outputs):
                        if out in local:
                            local[r] = local[out]
                    continue
                pid = f"{cid}_{counter[0]}"
                counter[0] += 1
                first = self.names.get(inner.results[0], "%?") if inner.results else ""
                types = ", ".join(str(r.type) for r in inner.results)
                items.append((pid, OpLine(f"{first} {inner.name}\n{types}", str(inner.loc) if inner.loc else "")))
                for v in inputs_of(inner):
                    readers.setdefault(v, []).append(pid)
                for r in inner.results:
                    local[r] = pid
            for v, ports in readers.items():
                if v in arg_src:
                    outer.setdefault(arg_src[v], ())
                    outer[arg_src[v]] = outer[arg_src[v]] + tuple(ports)
                elif v in local:
                    for p in ports:
                        self.inner_edges.append((local[v], p))
            for r, out in zip(fop.results, region.outputs):
                if out in local:
                    local[r] = local[out]
            return items

        items = build(op, in_ports, cid)
        for r in op.results:
            if r in local:
                out_ports[r] = local[r]
        return items

    # -- summaries ---------------------------------------------------------------------------
    def kernels(self) -> List[Node]:
        return [n for n in self.nodes if n.kind in ("fusion", "kernel", "control")]

    def tooltip(self, n: Node) -> str:
        parts = [n.title, n.subtitle]
        if n.kind in ("fusion", "kernel", "control"):
            parts.append(f"{n.flops:.0f} flops ({n.transcendentals:.0f} transcendental), reads "
                         f"{_size(n.bytes_in)}, writes {_size(n.bytes_out)}")
        if n.lines:
            parts.append("source: " + ", ".join(n.lines))
        parts += _some(n.reasons, MAX_TIP_REASONS)
        return "\n".join(p for p in parts if p)


# ------------------------------------------------------------------------------------------------
# Graphviz
# ------------------------------------------------------------------------------------------------

def _q(s: str) -> str:
    """A DOT double-quoted string (newlines as ``\\n``, Graphviz's centered line break)."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


_FILL = {"argument": "#e3f2fd", "output": "#e8f5e9", "fusion": "#fff3e0", "kernel": "#fce4ec",
         "control": "#ede7f6", "bitcast": "#f5f5f5", "constant": "#f5f5f5"}


def to_dot(g: ProgramGraph) -> str:
    """Graphviz ``digraph`` of the program: kernels as clusters of their ops, values as edges
    labelled with name, type, bytes and buffer slice, source lines and decisions in tooltips."""
    out = [f"digraph {_q(g.name)} {{"]
    title = f"{g.name}: {len(g.kernels())} kernels" + (f"\n{g.note}" if g.note else "")
    out.append(f"  graph [rankdir=TB, compound=true, fontname=\"monospace\", labelloc=t, label={_q(title)}];")
    out.append("  node [shape=box, style=\"rounded,filled\", fontname=\"monospace\", fontsize=10];")
    out.append("  edge [fontname=\"monospace\", fontsize=9];")

    def emit_items(items, depth):
        ind = "  " * depth
        for it in items:
            if isinstance(it[1], OpLine):
                pid, line = it
                label = line.text + (f"\n{line.loc}" if line.loc else "")
                out.append(f"{ind}{_q(pid)} [label={_q(label)}, fillcolor=\"#ffffff\", tooltip={_q(line.loc or line.text)}];")
            else:
                sid, stitle, sub = it
                out.append(f"{ind}subgraph {_q('cluster_' + sid)} {{")
                out.append(f"{ind}  label={_q(stitle)}; style=\"rounded,dashed\";")
                emit_items(sub, depth + 1)
                out.append(f"{ind}}}")

    for n in g.nodes:
        tip = g.tooltip(n)
        if n.id in g.clusters:
            label = f"{n.title}\n{n.subtitle}\n{n.flops:.0f} flops, {_size(n.bytes_in)} in, {_size(n.bytes_out)} out"
            out.append(f"  subgraph {_q('cluster_' + n.id)} {{")
            out.append(f"    label={_q(label)}; tooltip={_q(tip)}; style=\"rounded,filled\"; "
                       f"fillcolor=\"{_FILL['fusion']}\";")
            emit_items(g.clusters[n.id], 2)
            out.append("  }")
            continue
        shape = "ellipse" if n.kind in ("argument", "output") else "box"
        label = f"{n.title}\n{n.subtitle}" + (f"\n{n.loc}" if n.loc else "")
        out.append(f"  {_q(n.id)} [label={_q(label)}, shape={shape}, fillcolor=\"{_FILL[n.kind]}\", "
                   f"tooltip={_q(tip)}];")
    for a, b in g.inner_edges:
        out.append(f"  {_q(a)} -> {_q(b)};")
    for e in g.edges:
        for dst in e.dst_ports or (e.dst,):
            out.append(f"  {_q(e.src_port or e.src)} -> {_q(dst)} [label={_q(e.label())}, "
                       f"tooltip={_q(e.label())}];")
    out.append("}")
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------------------------------------
# HTML: a layered layout computed here, drawn as SVG
# ------------------------------------------------------------------------------------------------

CHAR_W, LINE_H, PAD, GAP_X, GAP_Y = 7.2, 15, 8, 28, 56


def _box_lines(n: Node) -> List[str]:
    lines = [n.title, n.subtitle]
    if n.kind == "fusion":
        shown = [("  " * o.depth) + o.text.split("\n")[0] for o in n.ops[:MAX_BOX_OPS]]
        lines += shown
        if len(n.ops) > MAX_BOX_OPS:
            lines.append(f"... {len(n.ops) - MAX_BOX_OPS} more ops (click)")
    if n.lines:
        src = ", ".join(n.lines[:3]) + (f" +{len(n.lines) - 3}" if len(n.lines) > 3 else "")
        lines.append(src)
    return [s for s in lines if s]


def layout(g: ProgramGraph) -> Dict[str, Tuple[float, float, float, float]]:
    """(x, y, width, height) of each node: layers by longest path from the arguments, order
    within a layer by the barycenter of the neighbours (a few sweeps down and up)."""
    preds: Dict[str, List[str]] = {n.id: [] for n in g.nodes}
    succs: Dict[str, List[str]] = {n.id: [] for n in g.nodes}
    for e in g.edges:
        preds[e.dst].append(e.src)
        succs[e.src].append(e.dst)
    layer: Dict[str, int] = {}
    for n in g.nodes:  # nodes are in a topological order (arguments, schedule, outputs)
        layer[n.id] = max((layer[p] + 1 for p in preds[n.id]), default=0)
    last = max(layer.values(), default=0)
    for n in g.nodes:
        if n.kind == "output":
            layer[n.id] = last
        elif n.kind == "argument" and succs[n.id]:
            # just above its first reader (a weight read by the last layer of a model is drawn
            # there, not at the top with a long edge down)
            layer[n.id] = max(0, min(layer[s] for s in succs[n.id]) - 1)
    layers: List[List[str]] = [[] for _ in range(last + 1)]
    for n in g.nodes:
        layers[layer[n.id]].append(n.id)
    pos = {nid: float(i) for row in layers for i, nid in enumerate(row)}
    for sweep in range(4):
        rows = layers[1:] if sweep % 2 == 0 else list(reversed(layers[:-1]))
        for row in rows:
            nbr = preds if sweep % 2 == 0 else succs
            key = {nid: (sum(pos[p] for p in nbr[nid]) / len(nbr[nid]) if nbr[nid] else pos[nid])
                   for nid in row}
            row.sort(key=lambda nid: key[nid])
            for i, nid in enumerate(row):
                pos[nid] = float(i)
    size = {}
    for n in g.nodes:
        lines = _box_lines(n)
        size[n.id] = (max(len(s) for s in lines) * CHAR_W + 2 * PAD, len(lines) * LINE_H + 2 * PAD)
    widths = [sum(size[nid][0] for nid in row) + GAP_X * (len(row) - 1) for row in layers]
    full = max(widths, default=0)
    out = {}
    y = PAD
    for row, w in zip(layers, widths):
        x = PAD + (full - w) / 2
        h = max((size[nid][1] for nid in row), default=0)
        for nid in row:
            bw, bh = size[nid]
            out[nid] = (x, y, bw, bh)
            x += bw + GAP_X
        y += h + GAP_Y
    return out


_SCRIPT = r"""
(function () {
  var data = JSON.parse(document.getElementById('hlo-data').textContent);
  var svg = document.getElementById('hlo-graph');
  var panel = document.getElementById('hlo-details');
  function text(tag, s) { var e = document.createElement(tag); e.textContent = s; return e; }
  function show(id) {
    var n = data.nodes[id];
    if (!n) return;
    panel.innerHTML = '';
    panel.appendChild(text('h2', n.title));
    panel.appendChild(text('p', n.subtitle));
    if (n.cost) panel.appendChild(text('p', n.cost));
    if (n.lines.length) panel.appendChild(text('p', 'source: ' + n.lines.join(', ')));
    if (n.ops.length) { panel.appendChild(text('h3', 'ops')); panel.appendChild(text('pre', n.ops.join('\n'))); }
    if (n.inputs.length) { panel.appendChild(text('h3', 'reads')); panel.appendChild(text('pre', n.inputs.join('\n'))); }
    if (n.outputs.length) { panel.appendChild(text('h3', 'writes')); panel.appendChild(text('pre', n.outputs.join('\n'))); }
    if (n.reasons.length) { panel.appendChild(text('h3', 'fusion decisions')); panel.appendChild(text('pre', n.reasons.join('\n'))); }
    var nodes = svg.querySelectorAll('g.node');
    for (var i = 0; i < nodes.length; i++)
      nodes[i].classList.toggle('selected', nodes[i].getAttribute('data-id') === id);
  }
  svg.addEventListener('click', function (ev) {
    var g = ev.target.closest ? ev.target.closest('g.node') : null;
    if (g) show(g.getAttribute('data-id'));
  });
  var vb = svg.getAttribute('viewBox').split(' ').map(Number);
  function setvb() { svg.setAttribute('viewBox', vb.join(' ')); }
  svg.addEventListener('wheel', function (ev) {
    ev.preventDefault();
    var r = svg.getBoundingClientRect(), f = ev.deltaY > 0 ? 1.15 : 1 / 1.15;
    var mx = vb[0] + (ev.clientX - r.left) / r.width * vb[2], my = vb[1] + (ev.clientY - r.top) / r.height * vb[3];
    vb = [mx - (mx - vb[0]) * f, my - (my - vb[1]) * f, vb[2] * f, vb[3] * f]; setvb();
  }, {passive: false});
  var drag = null;
  svg.addEventListener('mousedown', function (ev) { drag = [ev.clientX, ev.clientY, vb[0], vb[1]]; });
  window.addEventListener('mouseup', function () { drag = null; });
  window.addEventListener('mousemove', function (ev) {
    if (!drag) return;
    var r = svg.getBoundingClientRect();
    vb[0] = drag[2] - (ev.clientX - drag[0]) / r.width * vb[2];
    vb[1] = drag[3] - (ev.clientY - drag[1]) / r.height * vb[3]; setvb();
  });
  document.getElementById('hlo-search').addEventListener('input', function (ev) {
    var q = ev.target.value.trim(), nodes = svg.querySelectorAll('g.node');
    for (var i = 0; i < nodes.length; i++) {
      var n = data.nodes[nodes[i].getAttribute('data-id')];
      var hit = q && (n.title.indexOf(q) >= 0 || n.lines.join(' ').indexOf(q) >= 0 || n.ops.join('\n').indexOf(q) >= 0);
      nodes[i].classList.toggle('hit', !!hit);
    }
  });
})();
"""

_STYLE = """
body { margin: 0; font: 13px monospace; display: flex; height: 100vh; }
#hlo-main { flex: 1; display: flex; flex-direction: column; min-width: 0; }
#hlo-bar { padding: 6px 10px; border-bottom: 1px solid #ccc; }
#hlo-graph { flex: 1; width: 100%; cursor: grab; background: #fafafa; }
#hlo-details { width: 34em; overflow: auto; border-left: 1px solid #ccc; padding: 0 10px; }
#hlo-details pre { white-space: pre-wrap; }
"""

# Inside the SVG itself, so that it draws the same on its own (cut out of the page).
_SVG_STYLE = """
g.node rect { stroke: #666; stroke-width: 1; }
g.node.selected rect { stroke: #d32f2f; stroke-width: 3; }
g.node.hit rect { stroke: #1565c0; stroke-width: 3; }
text { font-family: monospace; font-size: 12px; }
path.edge { fill: none; stroke: #777; stroke-width: 1.2; }
text.edge { font-size: 10px; fill: #555; }
"""


def to_html(g: ProgramGraph) -> str:
    """One self-contained page: the program as an SVG (laid out by ``layout``), details of a
    kernel on click, wheel zoom, drag to pan and a search by name or source line. No network
    access and no Graphviz: everything is in the file."""
    pos = layout(g)
    width = max((x + w for x, _, w, _ in pos.values()), default=0) + 2 * PAD
    height = max((y + h for _, y, _, h in pos.values()), default=0) + 2 * PAD
    esc = html.escape
    parts = [f'<svg id="hlo-graph" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:.0f} {height:.0f}" '
             f'preserveAspectRatio="xMidYMin meet">',
             f'<style>{_SVG_STYLE}</style>',
             '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
             'markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#777"/></marker></defs>']
    fan_out: Dict[str, int] = {}
    fan_in: Dict[str, int] = {}
    for e in g.edges:
        fan_out[e.src] = fan_out.get(e.src, 0) + 1
        fan_in[e.dst] = fan_in.get(e.dst, 0) + 1
    for e in g.edges:
        x0, y0, w0, h0 = pos[e.src]
        x1, y1, w1, _ = pos[e.dst]
        ax, ay, bx, by = x0 + w0 / 2, y0 + h0, x1 + w1 / 2, y1
        my = (ay + by) / 2
        # the label where the edges around it are apart: near the end that has fewer of them
        t = 0.75 if fan_out[e.src] > fan_in[e.dst] else 0.25 if fan_in[e.dst] > fan_out[e.src] else 0.5
        lx = (1 - t) ** 3 * ax + 3 * (1 - t) ** 2 * t * ax + 3 * (1 - t) * t ** 2 * bx + t ** 3 * bx
        ly = (1 - t) ** 3 * ay + 3 * (1 - t) ** 2 * t * my + 3 * (1 - t) * t ** 2 * my + t ** 3 * by
        parts.append(f'<path class="edge" data-src="{esc(e.src)}" data-dst="{esc(e.dst)}" '
                     f'd="M{ax:.1f},{ay:.1f} C{ax:.1f},{my:.1f} {bx:.1f},{my:.1f} {bx:.1f},{by:.1f}" fill="none" '
                     f'marker-end="url(#arrow)"><title>{esc(e.label())}</title></path>')
        # on the edge: the type and size (the name and slice are in its tooltip and the details)
        # (beside the curve's middle, on the side it bends away to: converging or diverging
        # edges put their labels apart)
        anchor, dx = ("end", -4) if bx < ax - 1 else ("start", 4)
        parts.append(f'<text class="edge" x="{lx + dx:.1f}" y="{ly:.1f}" '
                     f'text-anchor="{anchor}">{esc(e.short_label())}</text>')
    for n in g.nodes:
        x, y, w, h = pos[n.id]
        parts.append(f'<g class="node {n.kind}" data-id="{esc(n.id)}"><title>{esc(g.tooltip(n))}</title>'
                     f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" rx="6" '
                     f'fill="{_FILL[n.kind]}"/>')
        for i, s in enumerate(_box_lines(n)):
            weight = ' font-weight="bold"' if i == 0 else ""
            parts.append(f'<text x="{x + PAD:.1f}" y="{y + PAD + (i + 0.8) * LINE_H:.1f}"{weight} '
                         f'xml:space="preserve">{esc(s)}</text>')
        parts.append("</g>")
    parts.append("</svg>")
    data = {"name": g.name, "note": g.note, "nodes": {}}
    ins: Dict[str, List[str]] = {}
    outs: Dict[str, List[str]] = {}
    for e in g.edges:
        ins.setdefault(e.dst, []).append(e.label())
        outs.setdefault(e.src, []).append(e.label())
    for n in g.nodes:
        cost = ""
        if n.kind in ("fusion", "kernel", "control"):
            cost = (f"{n.flops:.0f} flops ({n.transcendentals:.0f} transcendental); reads "
                    f"{_size(n.bytes_in)}, writes {_size(n.bytes_out)}")
        data["nodes"][n.id] = {
            "title": n.title, "subtitle": n.subtitle, "kind": n.kind, "cost": cost,
            "lines": n.lines, "reasons": _some(n.reasons, MAX_PAGE_REASONS),
            "ops": [("  " * o.depth) + o.text.replace("\n", " : ") + (f"    {o.loc}" if o.loc else "")
                    for o in n.ops],
            "inputs": list(dict.fromkeys(ins.get(n.id, []))),
            "outputs": list(dict.fromkeys(outs.get(n.id, [])))}
    blob = json.dumps(data).replace("</", "<\\/")
    head = f"{g.name}: {len(g.kernels())} kernels" + (f" ({g.note})" if g.note else "")
    return (
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
        f"<title>{esc(g.name)}</title><style>{_STYLE}</style></head><body>"
        f'<div id="hlo-main"><div id="hlo-bar"><b>{esc(head)}</b> &nbsp; '
        '<input id="hlo-search" placeholder="search: %N, op, file:line" size="30"> '
        "&nbsp; click a kernel for its ops, bytes and fusion decisions; wheel zooms, drag pans</div>"
        + "\n".join(parts) +
        '</div><div id="hlo-details"><p>Click a kernel.</p></div>'
        f'<script type="application/json" id="hlo-data">{blob}</script>'
        f"<script>{_SCRIPT}</script></body></html>\n")


def graph_of(module: Module, optimize_result=None) -> ProgramGraph:
    """The graph of an optimized module with what ``optimize_result`` (an ``Optimized``, or a
    cache hit's stored result) has of the buffer plan and the decisions."""
    buffers = getattr(optimize_result, "buffers", None)
    decisions: Iterable[str] = getattr(optimize_result, "decisions", None) or ()
    missing = []
    if not hasattr(buffers, "slice_for"):
        buffers = None
        missing.append("buffer slices")
    if getattr(optimize_result, "decisions", None) is None:
        missing.append("fusion decisions")
    note = ""
    if missing:
        note = (f"no {' or '.join(missing)}: the passes did not run in this process "
                "(an executable from the compilation cache or a file)")
    return ProgramGraph(module, buffers, list(decisions), note)
