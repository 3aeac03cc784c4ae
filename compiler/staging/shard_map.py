"""``hlo.shard_map(f, mesh, in_specs, out_specs)``: ``f`` written for one device's block, run on
every device of ``mesh`` at once, as jax's shard_map.

``in_specs``: one ``PartitionSpec`` per positional argument (it applies to every array of that
argument's pytree), or for an argument a pytree of them matching it; ``out_specs`` the same for
the result. A call splits each global argument (numpy arrays, or ``ShardedArray``s, whose blocks
are used as they are when laid out as the spec says) into the devices' blocks, traces ``f`` on
one block's shapes with the mesh's axes known to ``hlo.lax.psum`` and the other collectives
(``hlo.lax.parallel.axis_env``), compiles it once per signature for the CPU, and runs it as
one SPMD program: one partition per device, collectives in memory
(``hlo.runtime.cpu.devices.run_spmd``). The results are ``ShardedArray``s laid out by
``out_specs``; along a mesh axis an out spec does not name, the devices' blocks must agree
(they are not compared: the first device's is read, as jax's ``check_rep=False``).

Not yet: a shard_map inside a traced function (``hlo.jit``, ``hlo.grad`` of it), ``vmap`` of it
(``vmap`` inside ``f`` works), other targets than the CPU. Each is an error saying so.
"""
from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple

import numpy as np

from ..errors import ArgumentTypeError, ShapeError, UnsupportedError
from ..sharding import Mesh, NamedSharding, PartitionSpec
from ..tracing.tracer import Tracer
from ..tree_util import tree_flatten, tree_unflatten
from .sharded_array import ShardedArray


def _is_spec(s) -> bool:
    return isinstance(s, PartitionSpec) or s is None


def _leaf_specs(specs, trees: Sequence[Any], what: str) -> List[PartitionSpec]:
    """One PartitionSpec per leaf of ``trees`` (a spec per tree, or a pytree of specs each)."""
    if _is_spec(specs):
        specs = (specs,) * len(trees)
    if not isinstance(specs, (tuple, list)) or len(specs) != len(trees):
        raise ArgumentTypeError(f"hlo.shard_map: {what} must give one PartitionSpec per "
                                f"{'argument' if what == 'in_specs' else 'result'} ({len(trees)}), got {specs!r}")
    out: List[PartitionSpec] = []
    for k, (s, t) in enumerate(zip(specs, trees)):
        leaves, _ = tree_flatten(t)
        if _is_spec(s):
            out.extend([s if s is not None else PartitionSpec()] * len(leaves))
            continue
        ss, _ = tree_flatten(s, is_leaf=_is_spec)
        if len(ss) != len(leaves) or not all(_is_spec(x) for x in ss):
            raise ArgumentTypeError(f"hlo.shard_map: {what}[{k}] does not match its value's "
                                    f"structure ({len(leaves)} arrays)")
        out.extend([x if x is not None else PartitionSpec() for x in ss])
    return out


class ShardMapped:
    def __init__(self, f, mesh: Mesh, in_specs, out_specs):
        if not callable(f):
            raise ArgumentTypeError(f"hlo.shard_map: f must be callable, got {type(f).__name__}")
        if not isinstance(mesh, Mesh):
            raise ArgumentTypeError(f"hlo.shard_map: mesh must be an hlo.sharding.Mesh, got "
                                    f"{type(mesh).__name__}")
        self.f, self.mesh, self.in_specs, self.out_specs = f, mesh, in_specs, out_specs
        self._compiled: Dict[tuple, Tuple[Any, Any]] = {}
        self._index: Dict[tuple, list] = {}
        self.__name__ = getattr(f, "__name__", "shard_map")
        self.__wrapped__ = f

    def _blocks(self, x, spec: PartitionSpec, k: int) -> List[np.ndarray]:
        if isinstance(x, Tracer):
            raise UnsupportedError("hlo.shard_map inside a traced function (hlo.jit, hlo.grad, "
                                   "hlo.vmap of it) is not supported yet: call it on arrays, and "
                                   "transform f inside it")
        if isinstance(x, ShardedArray) and x.sharding == NamedSharding(self.mesh, spec):
            return x.blocks
        a = np.asarray(x)
        if a.dtype == object:
            raise ArgumentTypeError(f"hlo.shard_map: argument leaf {k} is not an array "
                                    f"({type(x).__name__})")
        key = (tuple(spec), a.shape)
        index = self._index.get(key)
        if index is None:  # each device's block of an array of this shape (views, no copies)
            sh = NamedSharding(self.mesh, spec)
            sh.check_shape(a.shape, f"hlo.shard_map: argument leaf {k}")
            index = self._index[key] = [sh.index(i, a.shape) for i in range(self.mesh.size)]
        return [a[i] for i in index]

    def _prepare(self, args):
        """(flat blocks per leaf, the args' tree, the compiled program, its out tree)."""
        import hlo

        from ..lax.parallel import axis_env
        flat, tree = tree_flatten(list(args))
        specs = _leaf_specs(self.in_specs, list(args), "in_specs")
        blocks = [self._blocks(x, s, k) for k, (x, s) in enumerate(zip(flat, specs))]
        held = [next(x for x in b if x is not None) for b in blocks]
        local = [hlo.ShapeDtypeStruct(b.shape, b.dtype) for b in held]
        key = (tree, tuple((sd.shape, str(sd.dtype)) for sd in local))
        if key not in self._compiled:
            local_args = tree_unflatten(tree, local)
            with axis_env(self.mesh.axis_names, self.mesh.devices.shape):
                lowered = hlo.jit(self.f).lower(*local_args)
            self._compiled[key] = (lowered.compile(target="cpu"), lowered.out_tree)
        compiled, out_tree = self._compiled[key]
        return blocks, tree, specs, compiled, out_tree

    def __call__(self, *args):
        blocks, tree, _, compiled, out_tree = self._prepare(args)
        return run_blocks(compiled, self.mesh, blocks, tree, out_tree,
                          lambda result, n: _out_specs_of(self.out_specs, result, n))

    def save(self, path, *args) -> None:
        """Compile for ``args`` (arrays, or ``hlo.ShapeDtypeStruct``s of the global shapes) and
        write the SPMD program to ``path`` (``.hlox``) with its mesh and specs;
        ``hlo.aot.load_sharded(path)`` runs it again, in a fresh process too."""
        import hlo
        from hlo.runtime import hlox

        from .saved import to_payload
        flat, tree = tree_flatten(list(args))
        flat = [np.zeros(x.shape, x.dtype) if isinstance(x, hlo.ShapeDtypeStruct) else x for x in flat]
        _, tree, specs, compiled, out_tree = self._prepare(tuple(tree_unflatten(tree, flat)))
        n_out = out_tree.num_leaves
        ospecs = _out_specs_of(self.out_specs, tree_unflatten(out_tree, [0] * n_out), n_out)
        payload = to_payload(compiled)
        payload.manifest["spmd"] = {
            "axis_names": list(self.mesh.axis_names), "mesh_shape": list(self.mesh.devices.shape),
            "in_specs": [_spec_json(sp) for sp in specs], "out_specs": [_spec_json(sp) for sp in ospecs]}
        hlox.write(path, payload)


def _spec_json(spec: PartitionSpec) -> list:
    return [e if e is None or isinstance(e, str) else list(e) for e in spec]


def _spec_from_json(j) -> PartitionSpec:
    if not isinstance(j, list):
        raise ValueError("a partition spec is a list")
    return PartitionSpec(*[e if e is None or isinstance(e, str) else tuple(e) for e in j])


class LoadedShardMap:
    """A saved SPMD program (``ShardMapped.save``), loaded: call it with global arrays as the
    shard_map it was saved from; it runs on the first ``mesh.size`` CPU devices."""

    def __init__(self, exe, mesh: Mesh, in_specs, out_specs):
        self.executable, self.mesh = exe, mesh
        self.in_specs, self.out_specs = in_specs, out_specs

    def __call__(self, *args):
        flat, tree = tree_flatten(list(args))
        if len(flat) != len(self.in_specs):
            raise ArgumentTypeError(f"the saved SPMD program takes {len(self.in_specs)} arrays "
                                    f"({self.executable.in_tree}), got {len(flat)}")
        blocks = [ShardedArray.from_global(np.asarray(x), NamedSharding(self.mesh, sp),
                                           f"argument leaf {k}").blocks
                  for k, (x, sp) in enumerate(zip(flat, self.in_specs))]
        return run_blocks(self.executable, self.mesh, blocks, tree, self.executable.out_tree,
                          lambda result, n: list(self.out_specs))


def load_sharded(path) -> LoadedShardMap:
    """Load an SPMD program saved by ``ShardMapped.save`` (``hlo.aot.load_sharded``). Its mesh
    needs as many CPU devices: with fewer (``HLO_CPU_DEVICES``), a ``LoadError`` says so."""
    import os

    import hlo
    from hlo.runtime import hlox
    from hlo.runtime.cpu.devices import device_count

    from .saved import LoadedExecutable
    p = os.fspath(path)
    payload = hlox.read(p)
    spmd = payload.manifest.get("spmd")
    if not isinstance(spmd, dict):
        raise hlox.LoadError(f"{p}: not an SPMD program (no mesh in its manifest): load it with hlo.load")
    try:
        names = [str(x) for x in spmd["axis_names"]]
        shape = [int(x) for x in spmd["mesh_shape"]]
        in_specs = [_spec_from_json(j) for j in spmd["in_specs"]]
        out_specs = [_spec_from_json(j) for j in spmd["out_specs"]]
    except (KeyError, TypeError, ValueError) as e:
        raise hlox.CorruptFileError(f"{p}: malformed SPMD manifest ({type(e).__name__}: {e})") from None
    n = int(np.prod(shape, dtype=np.int64))
    if n > device_count():
        raise hlox.LoadError(f"{p}: the program runs on a mesh of {n} CPU devices "
                             f"({dict(zip(names, shape))}); this process has {device_count()} "
                             f"(set HLO_CPU_DEVICES={n} before hlo's devices are first used)")
    exe = LoadedExecutable(payload, p, spmd_ok=True)
    mesh = Mesh(np.array(hlo.devices("cpu")[:n], dtype=object).reshape(shape), names)
    return LoadedShardMap(exe, mesh, in_specs, out_specs)


def run_blocks(compiled, mesh: Mesh, blocks, tree, out_tree, out_specs_for) -> Any:
    """Run ``compiled`` on every device of ``mesh`` with its blocks; the results as
    ``ShardedArray``s laid out by ``out_specs_for(result, n_leaves)``."""
    from hlo.runtime.cpu import process_spmd
    from hlo.runtime.cpu.devices import run_spmd
    n = mesh.size

    def args_of(i):
        return tree_unflatten(tree, [b[i] for b in blocks])

    def call(i, a):
        out, _ = tree_flatten(compiled(*a))
        return [np.asarray(o) for o in out]
    if process_spmd.multi_process() is not None:
        # several processes (hlo.distributed): this one runs its own partitions; the others'
        # blocks are theirs (None here)
        mine = process_spmd.run_local(call, list(mesh.devices.flat), args_of)
        outs = [mine.get(i) for i in range(n)]
    else:
        outs = run_spmd(call, [args_of(i) for i in range(n)], num_replicas=1, num_partitions=n)
    first = next(o for o in outs if o is not None)
    result = tree_unflatten(out_tree, first)
    ospecs = out_specs_for(result, len(first))
    made = []
    for j, spec in enumerate(ospecs):
        sh = NamedSharding(mesh, spec)
        bl = [None if outs[i] is None else outs[i][j] for i in range(n)]
        b0 = first[j]
        if len(spec) > b0.ndim:
            raise ShapeError(f"hlo.shard_map: out_specs {spec} for a result of rank {b0.ndim}")
        shape = tuple(d * sh.parts(k) for k, d in enumerate(b0.shape))
        made.append(ShardedArray(bl, shape, sh))
    return tree_unflatten(out_tree, made)


def _out_specs_of(out_specs, result, n_leaves: int) -> List[PartitionSpec]:
    if _is_spec(out_specs):
        return [out_specs or PartitionSpec()] * n_leaves
    ss, _ = tree_flatten(out_specs, is_leaf=_is_spec)
    if len(ss) == n_leaves and all(_is_spec(x) for x in ss):
        return [x or PartitionSpec() for x in ss]
    if isinstance(result, (tuple, list)):
        return _leaf_specs(out_specs, list(result), "out_specs")
    raise ArgumentTypeError(f"hlo.shard_map: out_specs {out_specs!r} does not match the result's "
                            f"structure ({n_leaves} arrays)")


def shard_map(f, mesh: Mesh, in_specs, out_specs) -> ShardMapped:
    """``f`` mapped over the blocks of ``mesh`` (see the module's docstring)."""
    return ShardMapped(f, mesh, in_specs, out_specs)
