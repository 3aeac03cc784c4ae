"""SPMD on CPU devices in one process: hlo.shard_map next to jax's shard_map, on 1, 2 and 4
devices (``python -m bench`` runs it as its ``spmd`` section; alone: ``python -m bench.spmd``).

    python -m bench.spmd [--devices 1,2,4] [--quick] [--json FILE]

Rows (f32), each the median of timed calls after a warm-up, in a fresh process per device
count (``HLO_CPU_DEVICES=n`` for hlo, ``--xla_force_host_platform_device_count=n`` for jax, set
before either is imported):

- ``dp_train_step``: one SGD step (lr 0.1) of bench's transformer layer (8 heads) under a mean
  squared error loss, the batch sharded over the devices, gradients averaged with ``pmean``
  (parameters replicated): the data-parallel step.
- ``tp_mlp``: a Megatron-style MLP ``relu(x @ w1) @ w2``, ``w1`` column-sharded and ``w2``
  row-sharded over the devices, one ``psum``.

Both systems get the same definition (hlo.numpy / jax.numpy) and the same specs; each result is
compared with the other (the relative difference is in the JSON). ``collectives`` is hlo's time
in collectives per step, summed over the devices (waiting for the group included). The machine's
cores are shared by the devices: on 2 cores, 4 devices time-share them.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SIZES = {"full": {"x": (32, 64, 256), "ffn": 1024, "mlp": (256, 1024, 4096)},
         "quick": {"x": (8, 8, 64), "ffn": 128, "mlp": (16, 64, 256)}}
LR = 0.1


def _child(n: int, quick: bool, min_time: float) -> dict:
    """Run in a fresh process with n devices: both systems, both rows."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh as JMesh
    from jax.sharding import PartitionSpec as JP

    import hlo
    import hlo.numpy as hnp
    from bench.workloads import Ops, _in_transformer, transformer_layer
    from hlo.runtime.cpu import collectives as hcoll
    from hlo.sharding import Mesh, P

    sizes = SIZES["quick" if quick else "full"]
    rng = np.random.default_rng(0)
    x, *params = _in_transformer(rng, {"x": sizes["x"], "ffn": sizes["ffn"]}, np.float32)
    y = rng.standard_normal(x.shape).astype(np.float32)
    rows = []

    def timed(call, sync):
        """(median seconds, calls made): one warm-up call, then timed calls."""
        out = call()
        sync(out)
        t0 = time.perf_counter()
        times = []
        while True:
            s = time.perf_counter()
            sync(call())
            times.append(time.perf_counter() - s)
            if time.perf_counter() - t0 > min_time and len(times) >= 3:
                break
        return statistics.median(times), len(times) + 1

    # -- dp_train_step --------------------------------------------------------------------
    def make_step(xp, grad, lax, invariant_params: bool):
        ops = Ops(xp, grad=grad)

        def loss(params, x, y):
            return xp.mean((transformer_layer(ops, x, *params) - y) ** 2)

        def step(params, x, y):
            if invariant_params:
                # jax's shard_map knows the parameters are the same on every device: the
                # gradient of the averaged loss is the global gradient (it inserts the psum)
                g = grad(lambda p: lax.pmean(loss(p, x, y), "batch"))(params)
            else:
                g = lax.pmean(grad(loss)(params, x, y), "batch")
            return [p - LR * gp for p, gp in zip(params, g)]
        return step

    hmesh = Mesh(hlo.devices("cpu")[:n], ("batch",))
    hstep = hlo.shard_map(make_step(hnp, hlo.grad, hlo.lax, False), hmesh,
                          in_specs=(P(), P("batch"), P("batch")), out_specs=P())
    jmesh = JMesh(np.array(jax.devices("cpu")[:n]), ("batch",))
    jstep = jax.jit(jax.shard_map(make_step(jnp, jax.grad, jax.lax, True), mesh=jmesh,
                                  in_specs=(JP(), JP("batch"), JP("batch")), out_specs=JP()))
    jparams = [jnp.asarray(p) for p in params]
    jx, jy = jnp.asarray(x), jnp.asarray(y)
    h_out = [np.asarray(a) for a in hstep(params, x, y)]
    j_out = [np.asarray(a) for a in jstep(jparams, jx, jy)]
    err = max(float(np.max(np.abs((a - p) - (b - p)))) / max(float(np.max(np.abs(b - p))), 1e-30)
              for a, b, p in zip(h_out, j_out, params))
    c0 = hcoll.stats()
    h_s, calls = timed(lambda: hstep(params, x, y), lambda o: None)
    c1 = hcoll.stats()
    j_s, _ = timed(lambda: jstep(jparams, jx, jy), lambda o: jax.block_until_ready(o))
    rows.append({"row": "dp_train_step", "devices": n, "shape": list(x.shape), "hlo_s": h_s, "jax_s": j_s,
                 "hlo_collective_s_per_step": (c1["seconds"] - c0["seconds"]) / calls,
                 "update_rel_err_vs_jax": err})

    # -- tp_mlp -----------------------------------------------------------------------------
    b, d, f = sizes["mlp"]
    xm = rng.standard_normal((b, d)).astype(np.float32)
    w1 = (rng.standard_normal((d, f)) / np.sqrt(d)).astype(np.float32)
    w2 = (rng.standard_normal((f, d)) / np.sqrt(f)).astype(np.float32)

    def make_mlp(xp, lax):
        return lambda x, w1, w2: lax.psum(xp.maximum(x @ w1, 0) @ w2, "model")
    hm = Mesh(hlo.devices("cpu")[:n], ("model",))
    hmlp = hlo.shard_map(make_mlp(hnp, hlo.lax), hm, in_specs=(P(), P(None, "model"), P("model", None)),
                         out_specs=P())
    jm = JMesh(np.array(jax.devices("cpu")[:n]), ("model",))
    jmlp = jax.jit(jax.shard_map(make_mlp(jnp, jax.lax), mesh=jm,
                                 in_specs=(JP(), JP(None, "model"), JP("model", None)), out_specs=JP()))
    jargs = [jnp.asarray(a) for a in (xm, w1, w2)]
    ho, jo = np.asarray(hmlp(xm, w1, w2)), np.asarray(jmlp(*jargs))
    err = float(np.max(np.abs(ho - jo)) / max(float(np.max(np.abs(jo))), 1e-30))
    c0 = hcoll.stats()
    h_s, calls = timed(lambda: hmlp(xm, w1, w2), lambda o: None)
    c1 = hcoll.stats()
    j_s, _ = timed(lambda: jmlp(*jargs), lambda o: jax.block_until_ready(o))
    rows.append({"row": "tp_mlp", "devices": n, "shape": [b, d, f], "hlo_s": h_s, "jax_s": j_s,
                 "hlo_collective_s_per_step": (c1["seconds"] - c0["seconds"]) / calls,
                 "rel_err_vs_jax": err})
    return {"devices": n, "rows": rows}


def run(devices=(1, 2, 4), quick: bool = False, min_time: float = 1.0) -> list:
    """Every device count in a fresh process; the rows."""
    rows = []
    for n in devices:
        env = dict(os.environ, HLO_CPU_DEVICES=str(n),
                   XLA_FLAGS=(os.environ.get("XLA_FLAGS", "") + f" --xla_force_host_platform_device_count={n}").strip(),
                   JAX_PLATFORMS="cpu")
        code = ("import json, sys; from bench.spmd import _child; "
                f"print('SPMD-RESULT ' + json.dumps(_child({n}, {quick}, {min_time})))")
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                           cwd=str(Path(__file__).resolve().parent.parent), timeout=1200)
        line = [x for x in r.stdout.splitlines() if x.startswith("SPMD-RESULT ")]
        if r.returncode != 0 or not line:
            rows.append({"row": "*", "devices": n, "status": "error",
                         "note": (r.stderr.strip().splitlines() or ["no output"])[-1][:300]})
            continue
        rows.extend(json.loads(line[0][len("SPMD-RESULT "):])["rows"])
    return check(rows)


TOLERANCE = 1e-2  # relative difference between the systems' results (f32, different schedules)


def check(rows) -> list:
    """Rows whose systems disagree get status "wrong"."""
    for r in rows:
        err = r.get("update_rel_err_vs_jax", r.get("rel_err_vs_jax"))
        if err is not None and not err <= TOLERANCE:
            r["status"] = "wrong"
            r["note"] = f"hlo and jax differ by {err:.2g} (relative)"
    return rows


def format_table(rows) -> str:
    out = ["spmd (CPU devices in one process; median per call)",
           f"{'row':15} {'devices':>7} {'hlo ms':>9} {'jax ms':>9} {'hlo/jax':>8} {'collectives ms':>15}"]
    for r in rows:
        if r.get("status") in ("error", "wrong"):
            out.append(f"{r['row']:15} {r['devices']:>7}  {r['status']}: {r['note']}")
            continue
        out.append(f"{r['row']:15} {r['devices']:>7} {r['hlo_s'] * 1e3:9.3f} {r['jax_s'] * 1e3:9.3f} "
                   f"{r['hlo_s'] / r['jax_s']:8.2f} {r['hlo_collective_s_per_step'] * 1e3:15.3f}")
    return "\n".join(out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.spmd", description=__doc__.split("\n\n")[0])
    p.add_argument("--devices", default="1,2,4")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--min-time", type=float, default=1.0)
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    rows = run(tuple(int(x) for x in a.devices.split(",")), a.quick, a.min_time)
    print(format_table(rows))
    if a.json:
        Path(a.json).write_text(json.dumps({"spmd": rows}, indent=1))
    return 1 if any(r.get("status") in ("error", "wrong") for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
