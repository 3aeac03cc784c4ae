"""Content edits of a saved executable with the checksum recomputed (what anyone who writes a
file can do), each loaded with ``recompile=True`` and run in a process of its own.

A case is one edit: a byte of the manifest, the IR or the native code changed, inserted or
deleted, or one manifest field replaced by a hostile value (a library path, a huge or negative
number, a wrong type), then the container rewritten by ``hlox.dumps`` (or, for raw edits of the
container, its trailing sha256 recomputed). Each case forks from a parent that has imported hlo
but never run native code, and ends as one of:

- ``refused``: a ``LoadError`` (or, for a file whose signature changed, ``InputMismatchError``
  when called with the original arguments);
- ``same``: it ran and gave the original program's result;
- ``own``: it ran and gave what the file's own (edited) IR means, by the reference interpreter;
- ``wrong``: any other result (silently wrong);
- ``error``: another exception; ``crash``: a signal or an exit without a report; ``hang``.
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import resource
import select
import signal
import sys
import time
import traceback
from typing import Dict, List, Tuple

import numpy as np

HOSTILE = [0, -1, 1, 2 ** 63, -(2 ** 63), 2 ** 31, 1.5, float("1e308"), "", "x", "/tmp/evil.so",
           "libc.so.6", [], [0], [2 ** 63, 0], {}, {"a": 1}, None, True, False, "blas",
           "f32", [[1]], "hlo_run", "../../etc/passwd"]


def _paths(obj, prefix=()):
    """Every (path, value) in a JSON value."""
    yield prefix, obj
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, prefix + (i,))


def _set(obj, path, value):
    for k in path[:-1]:
        obj = obj[k]
    obj[path[-1]] = value


def _byte_edit(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    if not b:
        return bytes([rng.randrange(256)])
    i = rng.randrange(len(b))
    how = rng.random()
    if how < 0.6:
        b[i] = rng.randrange(256)
    elif how < 0.8:
        b.insert(i, rng.randrange(256))
    else:
        del b[i]
    return bytes(b)


def make_case(rng: random.Random, data: bytes) -> Tuple[str, bytes]:
    """One edited file: (description, bytes)."""
    from hlo.runtime import hlox
    payload = hlox.loads(data)
    sections = dict(payload.sections)
    manifest = json.loads(json.dumps(payload.manifest))
    r = rng.random()
    if r < 0.35:  # a manifest field replaced
        paths = [p for p, _ in _paths(manifest) if p]
        path = rng.choice(paths)
        value = rng.choice(HOSTILE)
        _set(manifest, path, value)
        what = f"manifest{list(path)} = {value!r}"
    elif r < 0.45:  # a byte of the manifest's JSON text
        text = json.dumps(manifest).encode()
        for _ in range(20):
            edited = _byte_edit(rng, text)
            try:
                manifest = json.loads(edited)
                break
            except ValueError:
                continue
        else:
            manifest = {"format_version": 1}
        what = "manifest JSON byte"
    elif r < 0.75:
        sections["ir"] = _byte_edit(rng, sections["ir"])
        what = "IR byte"
    elif r < 0.9:  # the program's object or its library code (code.cpu.core.<i>)
        name = rng.choice(sorted(k for k in sections if k == "code.cpu" or k.startswith("code.cpu.core.")))
        sections[name] = _byte_edit(rng, sections[name])
        what = f"native code byte ({name})"
    else:  # a raw byte of the container (table, offsets, padding), checksum recomputed
        body = _byte_edit(rng, data[:-32])
        return "container byte", body + hashlib.sha256(body).digest()
    if not isinstance(manifest, dict) or manifest.get("format_version") != 1:
        manifest = {"format_version": 1, "broken": manifest}
    try:
        return what, hlox.dumps(hlox.Payload(manifest, sections))
    except Exception:  # the writer refuses it: keep the raw edit instead
        body = _byte_edit(rng, data[:-32])
        return what + " (raw)", body + hashlib.sha256(body).digest()


def manifest_case(rng: random.Random, data: bytes, focus: Tuple[str, ...] = ("runtime", "steps"),
                  p_focus: float = 0.7) -> Tuple[str, bytes]:
    """One file whose manifest is edited structurally (sections untouched): a field under
    ``focus`` (the step list, by default) with probability ``p_focus``, else any field of the
    manifest, is replaced by a hostile value or deleted, or the list or object holding it is
    replaced whole (a step list that is not a list, a step that is not an object)."""
    from hlo.runtime import hlox
    payload = hlox.loads(data)
    manifest = json.loads(json.dumps(payload.manifest))
    everything = [p for p, _ in _paths(manifest) if p and p != ("format_version",)]
    focused = [p for p in everything if p[:len(focus)] == focus and len(p) > len(focus)] or everything
    path = rng.choice(focused if rng.random() < p_focus else everything)
    how = rng.random()
    if how < 0.6:
        value = rng.choice(HOSTILE)
        _set(manifest, path, json.loads(json.dumps(value)))
        what = f"manifest{list(path)} = {value!r}"
    elif how < 0.85:
        parent = manifest
        for k in path[:-1]:
            parent = parent[k]
        del parent[path[-1]]
        what = f"manifest{list(path)} deleted"
    else:
        value = rng.choice(HOSTILE)
        holder = path[:-1] or path
        _set(manifest, holder, json.loads(json.dumps(value)))
        what = f"manifest{list(holder)} = {value!r}"
    return what, hlox.dumps(hlox.Payload(manifest, payload.sections))


def load_outcome(data: bytes, path: str) -> Dict:
    """What ``hlo.load`` does with ``data`` (written to ``path``): ``refused`` (a LoadError that
    names the file), ``loaded``, or ``error`` (anything else: what must never happen)."""
    import hlo
    from hlo.runtime.hlox import LoadError
    with open(path, "wb") as fh:
        fh.write(data)
    try:
        hlo.load(path)
    except LoadError as e:
        if path not in str(e):
            return {"outcome": "error", "why": f"LoadError without the file name: {e}"[:300]}
        return {"outcome": "refused", "why": str(e)[:200]}
    except Exception as e:
        return {"outcome": "error", "why": f"{type(e).__name__}: {e}"[:300],
                "trace": traceback.format_exc()[-800:]}
    return {"outcome": "loaded"}


def _close(a, b) -> bool:
    return len(a) == len(b) and all(
        np.shape(x) == np.shape(y) and np.asarray(x).dtype == np.asarray(y).dtype and
        np.allclose(np.asarray(x, np.float64), np.asarray(y, np.float64), rtol=1e-4, atol=1e-5,
                    equal_nan=True) for x, y in zip(a, b))


def _child(data: bytes, inputs, expected) -> Dict:
    from hlo import aot
    from hlo.runtime.hlox import ExecutableError, InputMismatchError, LoadError
    try:
        exe = aot.loads(data, recompile=True)
    except LoadError as e:
        return {"outcome": "refused", "why": str(e)[:200]}
    try:
        out = exe.run_flat(inputs)
    except (InputMismatchError, ExecutableError) as e:
        return {"outcome": "refused", "why": "at call: " + str(e)[:200]}
    if _close(out, expected):
        return {"outcome": "same"}
    from hlo.ir import parse_module
    from hlo.ir.interpreter import run
    own = run(parse_module(exe.as_text()), inputs)
    return {"outcome": "own" if _close(out, own) else "wrong"}


def run_cases(data: bytes, inputs, expected, n: int, seed: int = 0, jobs: int = 2,
              timeout: float = 120.0) -> List[Dict]:
    """Run ``n`` edited cases of ``data``; returns one dict per case (outcome, what)."""
    rng = random.Random(seed)
    cases = [make_case(rng, data) for _ in range(n)]
    results: List[Dict] = [None] * n
    running: Dict[int, Tuple[int, int, float]] = {}  # pid -> (case, read fd, start)
    todo = list(range(n))[::-1]
    while todo or running:
        while todo and len(running) < jobs:
            i = todo.pop()
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:  # the case's own process
                os.close(r)
                code = 0
                try:
                    resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))
                    res = _child(cases[i][1], inputs, expected)
                except BaseException as e:
                    res = {"outcome": "error", "why": f"{type(e).__name__}: {e}"[:300],
                           "trace": traceback.format_exc()[-800:]}
                try:
                    os.write(w, json.dumps(res).encode())
                finally:
                    os._exit(code)
            os.close(w)
            running[pid] = (i, r, time.monotonic())
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            for p, (i, r, t0) in list(running.items()):
                if time.monotonic() - t0 > timeout:
                    os.kill(p, signal.SIGKILL)
                    os.waitpid(p, 0)
                    os.close(r)
                    results[i] = {"outcome": "hang"}
                    del running[p]
            select.select([], [], [], 0.05)
            continue
        i, r, _ = running.pop(pid)
        chunks = []
        while True:
            c = os.read(r, 1 << 16)
            if not c:
                break
            chunks.append(c)
        os.close(r)
        raw = b"".join(chunks)
        if os.WIFSIGNALED(status) or not raw:
            sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
            results[i] = {"outcome": "crash", "why": f"signal {sig}" if sig else
                          f"exit {os.WEXITSTATUS(status)}"}
        else:
            results[i] = json.loads(raw)
    for res, (what, _) in zip(results, cases):
        res["what"] = what
    return results


def prepare_parent() -> None:
    """Import what a case needs before forking (no native code runs, no threads start)."""
    import importlib
    for name in ("hlo.aot", "hlo.staging.stages", "hlo.passes.pipeline", "hlo.backends.cpu",
                 "hlo.backends.lower", "hlo.ir.interpreter"):
        importlib.import_module(name)
    from hlo.backends.cpu.llvm_pipeline import target_machine
    target_machine()
    # the GEMM's f32 library code, compiled (not linked) once here rather than in every case
    from hlo.backends.cpu.gemm_library import object_code
    from hlo.backends.cpu.gemm_tiled import library_body
    for mode in ("contig", "gather"):
        object_code(library_body("f32", mode, False))


if __name__ == "__main__":  # python tests/aot/hlox_fuzz.py FILE.hlox INPUTS.npz N [SEED]
    path, npz, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    seed = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    prepare_parent()
    from hlo.ir import parse_module
    from hlo.ir.interpreter import run
    from hlo.runtime import hlox
    data = open(path, "rb").read()
    d = np.load(npz)
    inputs = [d[k] for k in sorted(d.files, key=lambda k: int(k.split("_")[1]))]
    expected = run(parse_module(hlox.loads(data).sections["ir"].decode()), inputs)
    res = run_cases(data, inputs, expected, n, seed)
    counts: Dict[str, int] = {}
    for r in res:
        counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
    bad = [r for r in res if r["outcome"] in ("wrong", "error", "crash", "hang")]
    print(json.dumps({"counts": counts, "bad": bad[:20]}))
