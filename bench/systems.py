"""The systems the bench compares, behind one small interface.

A ``System`` says whether it can run at all (``unavailable()``), whether it skips a case
(``skip(case)``, a sentence that the table prints), and binds a case's inputs (``bind``), which puts
them where the system wants them (device arrays, tensors) without timing that transfer. The
returned ``Bound`` has ``first()`` (build: trace + compile, then the first call; the harness times
it as the first-call time), ``call()``, ``sync(out)``, ``host(out)`` (numpy copies for the check)
and ``stats()`` (kernel count and temp bytes where the system reports them).

Peer packages are imported lazily here so that the bench runs with whichever are installed.
"""
from __future__ import annotations

import importlib
import re
import statistics
from typing import Optional

import numpy as np

from bench.workloads import Case, Ops, flatten


class System:
    name = "?"
    is_peer = True        # peers set the "fastest peer" that the ratios divide by; hlo rows are not peers

    def __init__(self, gpu: bool, quick: bool):
        self.gpu = gpu
        self.quick = quick

    @property
    def device(self) -> str:
        return "gpu" if self.gpu else "cpu"

    def unavailable(self) -> Optional[str]:
        return None

    def skip(self, case: Case) -> Optional[str]:
        return None

    def bind(self, case: Case, inputs: list) -> "Bound":
        raise NotImplementedError

    def versions(self) -> dict:
        return {}

    def missing_feature(self, exc: BaseException) -> Optional[str]:
        """A sentence if ``exc`` means "this system lacks a feature" (a skip) rather than a bug."""
        return None


class Bound:
    def first(self):
        return self.call()

    def call(self):
        raise NotImplementedError

    def sync(self, out) -> None:
        pass

    def host(self, out) -> list:
        return [np.asarray(a) for a in flatten(out)]

    def stats(self) -> dict:
        return {}


def _missing(module: str) -> Optional[str]:
    try:
        importlib.import_module(module)
        return None
    except ImportError as e:
        return f"{module} not installed ({e}); pip install -r bench/requirements-peers.txt"


# ---------------------------------------------------------------- numpy

class NumpySystem(System):
    name = "numpy"

    @property
    def device(self) -> str:
        return "cpu"

    def skip(self, case):
        if case.dtype in ("f16", "bf16") and not self.quick:
            return f"numpy has no fast {case.dtype} arithmetic (its matmul runs scalar loops); see the f32 rows"
        return None

    def bind(self, case, inputs):
        fn = case.workload.numpy_fn or case.workload.fn
        ops = Ops(np)

        class B(Bound):
            def call(self):
                return fn(ops, *inputs)
        return B()

    def versions(self):
        return {"numpy": np.__version__}


# ---------------------------------------------------------------- jax.jit (XLA)

XLA_NOT_KERNELS = {"parameter", "constant", "tuple", "get-tuple-element", "bitcast"}


def xla_entry_opcodes(hlo_text: str) -> dict:
    """Opcode -> count for the instructions of the ENTRY computation of XLA's optimized HLO text."""
    counts: dict = {}
    in_entry = False
    for line in hlo_text.splitlines():
        s = line.strip()
        if s.startswith("ENTRY "):
            in_entry = True
            continue
        if not in_entry:
            continue
        if s == "}":
            break
        if " = " not in s:
            continue
        rhs = s.split(" = ", 1)[1]
        if rhs.startswith("("):                       # tuple-shaped result: skip the balanced type
            depth = 0
            for i, ch in enumerate(rhs):
                depth += ch == "("
                depth -= ch == ")"
                if depth == 0:
                    rhs = rhs[i + 1:]
                    break
        else:
            rhs = rhs.split(" ", 1)[1] if " " in rhs else rhs
        m = re.match(r"\s*([a-z][\w\-]*)\(", rhs)
        if m:
            counts[m.group(1)] = counts.get(m.group(1), 0) + 1
    return counts


def xla_stats(compiled) -> dict:
    """Kernels (ENTRY instructions other than parameter/constant/tuple/gte/bitcast) and temp bytes."""
    ops = xla_entry_opcodes(compiled.as_text())
    kernels = {k: v for k, v in ops.items() if k not in XLA_NOT_KERNELS}
    mem = compiled.memory_analysis()
    return {"kernels": sum(kernels.values()), "kernel_ops": kernels,
            "temp_bytes": int(mem.temp_size_in_bytes) if mem is not None else None}


class JaxSystem(System):
    name = "jax.jit"

    def unavailable(self):
        miss = _missing("jax")
        if miss:
            return miss
        if self.gpu:
            import jax
            try:
                jax.devices("gpu")
            except RuntimeError as e:
                return f"jax has no GPU backend here ({str(e).splitlines()[0]})"
        return None

    def bind(self, case, inputs):
        import jax
        import jax.numpy as jnp
        dev = jax.devices("gpu" if self.gpu else "cpu")[0]
        args = [jax.device_put(a, dev) for a in inputs]
        body = case.workload.fn

        def fn(*a):
            return body(Ops(jnp, jax.grad, jax.vmap, jax.lax), *a)

        class B(Bound):
            def first(self):
                self.f = jax.jit(fn)
                return self.f(*args)

            def call(self):
                return self.f(*args)

            def sync(self, out):
                jax.block_until_ready(out)

            def stats(self):
                return xla_stats(jax.jit(fn).lower(*args).compile())
        return B()

    def versions(self):
        import jax
        import jaxlib
        return {"jax": jax.__version__, "jaxlib": jaxlib.__version__}


# ---------------------------------------------------------------- torch eager / torch.compile

def to_torch(a: np.ndarray, device: str):
    import torch
    if a.dtype.name == "bfloat16":
        t = torch.from_numpy(np.ascontiguousarray(a).view(np.uint16)).view(torch.bfloat16)
    else:
        t = torch.from_numpy(np.ascontiguousarray(a))
    return t.to(device)


def from_torch(t) -> np.ndarray:
    import torch
    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        t = t.float()
    return t.numpy()


class TorchSystem(System):
    name = "torch"
    compiled = False

    def unavailable(self):
        miss = _missing("torch")
        if miss:
            return miss
        import torch
        if self.gpu and not torch.cuda.is_available():
            return f"torch {torch.__version__} sees no CUDA device"
        return None

    def skip(self, case):
        from bench import torch_impl
        if case.workload.id not in (torch_impl.COMPILED if self.compiled else torch_impl.EAGER):
            return "skipped: no torch implementation of this workload in bench/torch_impl.py"
        return None

    def _impl(self, case):
        from bench import torch_impl
        return (torch_impl.COMPILED if self.compiled else torch_impl.EAGER)[case.workload.id]

    def _make(self, impl):
        return impl

    def bind(self, case, inputs):
        import torch
        dev = "cuda" if self.gpu else "cpu"
        args = [to_torch(a, dev) for a in inputs]
        impl = self._impl(case)
        make = self._make
        gpu = self.gpu

        class B(Bound):
            def first(self):
                self.f = make(impl)
                return self.call()

            def call(self):
                with torch.no_grad():
                    return self.f(*args)

            def sync(self, out):
                if gpu:
                    torch.cuda.synchronize()

            def host(self, out):
                return [from_torch(t) for t in flatten(out)]
        return B()

    def versions(self):
        import torch
        v = {"torch": torch.__version__, "torch_threads": torch.get_num_threads()}
        if self.gpu and torch.cuda.is_available():
            v["cuda"] = torch.version.cuda
        return v


class TorchCompileSystem(TorchSystem):
    """torch.compile (Dynamo + Inductor, default mode, dynamic=False), compiled in-process with a
    fresh cache directory (set by bench/run.py before torch is imported)."""
    name = "torch.compile"
    compiled = True

    def _make(self, impl):
        import torch
        torch._dynamo.reset()
        return torch.compile(impl, dynamic=False)


class TorchCompileReduceOverheadSystem(TorchCompileSystem):
    """torch.compile(mode="reduce-overhead"): Inductor's code replayed through CUDA graphs (the
    peer of hlo's graph replay); GPU runs only. Each call starts a new graph step
    (``torch.compiler.cudagraph_mark_step_begin``), since a replay reuses its outputs' memory."""
    name = "torch.compile-ro"

    def unavailable(self):
        if not self.gpu:
            return "torch.compile mode='reduce-overhead' (CUDA graphs) is measured on --gpu runs only"
        return super().unavailable()

    def _make(self, impl):
        import torch
        torch._dynamo.reset()
        f = torch.compile(impl, dynamic=False, mode="reduce-overhead")
        mark = torch.compiler.cudagraph_mark_step_begin

        def step(*args):
            mark()
            return f(*args)
        return step


# ---------------------------------------------------------------- IREE (llvm-cpu)

class IreeSystem(System):
    """IREE compiling the StableHLO that jax.jit(f).lower(...).as_text() gives, llvm-cpu, host CPU."""
    name = "iree"

    @property
    def device(self) -> str:
        return "cpu"

    def unavailable(self):
        if self.gpu:
            return "IREE is measured on the CPU only (llvm-cpu); run the bench without --gpu for its rows"
        return _missing("iree.compiler") or _missing("iree.runtime") or _missing("jax")

    def bind(self, case, inputs):
        import iree.compiler as ic
        import iree.runtime as ir
        import jax
        import jax.numpy as jnp
        body = case.workload.fn

        def fn(*a):
            return body(Ops(jnp, jax.grad, jax.vmap), *a)

        class B(Bound):
            def first(self):
                text = jax.jit(fn).lower(*inputs).as_text()
                vmfb = ic.compile_str(text, target_backends=["llvm-cpu"], input_type="stablehlo",
                                      extra_args=["--iree-llvmcpu-target-cpu=host"])
                config = ir.Config("local-task")
                self.ctx = ir.SystemContext(config=config)
                self.ctx.add_vm_module(ir.VmModule.copy_buffer(self.ctx.instance, vmfb))
                name = next(k for k in self.ctx.modules.keys() if k != "hal")
                self.f = self.ctx.modules[name]["main"]
                self.args = [ir.asdevicearray(config.device, a) for a in inputs]
                return self.call()

            def call(self):
                return self.f(*self.args)

            def host(self, out):
                return [np.asarray(a.to_host()) for a in flatten(out)]
        return B()

    def versions(self):
        from importlib.metadata import version
        return {"iree-base-compiler": version("iree-base-compiler"),
                "iree-base-runtime": version("iree-base-runtime")}


# ---------------------------------------------------------------- hlo

class HloSystem(System):
    """hlo.jit(fn, target=...) on hlo.numpy; first call = trace + compile + run. On target cuda
    the inputs are ``hlo.device_put`` once at bind (outside the timed calls), each call returns
    DeviceArrays asynchronously and ``sync`` waits with ``block_until_ready``."""
    is_peer = False

    def __init__(self, gpu: bool, quick: bool, target: str):
        super().__init__(gpu, quick)
        self.target = target
        self.name = f"hlo:{target}"
        # numpy with the OPENBLAS_* variables unset (``bench.numpy_unset.UnsetMatmul``), timed in
        # alternation with the product kernels' profiled run (``product_rate``); set by the runner
        self.product_reference = None

    @property
    def device(self) -> str:
        return "gpu" if self.target == "cuda" else "cpu"

    def unavailable(self):
        try:
            import hlo
            import hlo.numpy
        except ImportError as e:
            return f"hlo.numpy is not importable ({e})"
        if not hasattr(hlo, "jit"):
            return "hlo.jit does not exist yet"
        return None

    def skip(self, case):
        import hlo
        if case.workload.section == "families" and self.target == "interpreter":
            return "skipped: the families section times the compiled targets"
        if case.workload.imported and _missing("jax"):
            return "skipped: an imported workload needs jax to write its StableHLO"
        if case.workload.needs_grad and not hasattr(hlo, "grad"):
            return "skipped: hlo.grad not implemented"
        if case.workload.needs_vmap and not hasattr(hlo, "vmap"):
            return "skipped: hlo.vmap not implemented"
        return None

    def bind(self, case, inputs):
        import hlo
        import hlo.numpy as hnp
        system = self
        body = case.workload.fn
        ops = Ops(hnp, getattr(hlo, "grad", None), getattr(hlo, "vmap", None), getattr(hlo, "lax", None))
        target = self.target
        # on the GPU the inputs live there before timing starts, as the peers' do
        args = [hlo.device_put(a) for a in inputs] if target == "cuda" else list(inputs)

        def fn(*a):
            return body(ops, *a)
        fn.__name__ = case.workload.id

        def lower():
            """The program as hlo gets it: traced from ``fn``, or (``imported``) the StableHLO
            that jax.jit lowers the same body to, loaded."""
            if not case.workload.imported:
                return hlo.jit(fn, target=target).lower(*inputs)
            import jax
            import jax.numpy as jnp
            jops = Ops(jnp, jax.grad, jax.vmap, jax.lax)
            text = jax.jit(lambda *a: body(jops, *a)).lower(*inputs).as_text()
            return hlo.load_stablehlo(text, source_name=f"<{case.workload.id}, from jax>")

        def build():
            return lower().compile(target=target) if case.workload.imported else hlo.jit(fn, target=target)

        class B(Bound):
            def first(self):
                self.f = build()
                return self.call()

            def call(self):
                return self.f(*args)

            def sync(self, out):
                for a in flatten(out):
                    if hasattr(a, "block_until_ready"):
                        a.block_until_ready()

            def stats(self):
                # Compile time = trace + passes + codegen + load, timed on a fresh compile of the
                # same function (the persistent cache, where there is one, is bypassed).
                import contextlib
                import time
                try:
                    ctx = hlo.config.override(cache=False)
                    hlo.config.read("cache")
                except (KeyError, AttributeError):
                    ctx = contextlib.nullcontext()
                with ctx:
                    t0 = time.perf_counter()
                    compiled = lower().compile(target=target) if case.workload.imported else \
                        hlo.jit(fn, target=target).lower(*inputs).compile()
                    st = {"compile_s": time.perf_counter() - t0}
                if hasattr(compiled, "cost_analysis"):
                    st["kernels"] = compiled.cost_analysis()["kernels"]
                if hasattr(compiled, "memory_analysis"):
                    st["temp_bytes"] = int(compiled.memory_analysis().temp_size_in_bytes)
                if target == "cpu" and case.flops():
                    lowered = lower() if case.workload.imported else hlo.jit(fn, target=target).lower(*inputs)
                    lowered.target = target
                    st.update(product_rate(lowered, inputs, system.product_reference))
                return st
        return B()

    def missing_feature(self, exc):
        m = re.search(r"module 'hlo\.(\w+(?:\.\w+)*)' has no attribute '(\w+)'", str(exc))
        if isinstance(exc, AttributeError) and m:
            return f"skipped: hlo.{m.group(1)}.{m.group(2)} does not exist yet"
        return None

    def versions(self):
        import hlo
        return {"hlo": getattr(hlo, "__version__", "?")}


# The profiled run of ``product_rate``: calls for PROFILE_WARMUP_S (not counted), then at least
# PROFILE_MIN_CALLS calls and PROFILE_MIN_S seconds. (With one warm-up call and 0.05 s, the
# train step's products read 256 GFLOP/s in one make bench run, 281-307 in longer runs.) With a
# reference (numpy with the OPENBLAS_* variables unset), PROFILE_ROUNDS such runs alternate with
# its bursts; each round after the first warms up for PROFILE_REWARM_S (the reference's burst and
# pause leave the program's data out of cache).
PROFILE_WARMUP_S = 0.1
PROFILE_MIN_S = 0.3
PROFILE_MIN_CALLS = 3
PROFILE_ROUNDS = 7
PROFILE_REWARM_S = 0.02


def product_rate(lowered, inputs, reference=None, rounds: int = PROFILE_ROUNDS) -> dict:
    """The product kernels' rate in hlo:cpu's real run: one extra, profiled build
    (``compile(profile=True)``, separate from the timed unprofiled calls) called a few times; the
    sum of its product kernels' FLOPs over the sum of their in-program seconds, those of the
    sums of split products included (``product_GFLOPs``), with their share of the calls' wall
    time. Empty for a program without float products.

    With ``reference`` (``bench.numpy_unset.UnsetMatmul``): ``rounds`` rounds of one reference
    burst, then one profiled run; ``product_GFLOPs`` is the median of the rounds' rates,
    ``numpy_unset_GFLOPs`` the median of the reference's and ``product_fraction_of_numpy_unset``
    the median of the per-round ratios (each taken within the same second, so the host's drift
    moves both sides alike)."""
    from hlo.backends.cpu.gemm_profile import profile_calls
    compiled = lowered.compile(profile=True)
    if reference is None:
        prof = profile_calls(compiled, inputs, PROFILE_MIN_S, PROFILE_MIN_CALLS, PROFILE_WARMUP_S)
        if prof.product_gflops is None:
            return {}
        return {"product_GFLOPs": prof.product_gflops, "product_kernels": len(prof.float_products),
                "product_share": _product_share(prof)}
    rows = []
    for r in range(rounds):
        ref = reference.rate()
        prof = profile_calls(compiled, inputs, PROFILE_MIN_S, PROFILE_MIN_CALLS,
                             PROFILE_WARMUP_S if r == 0 else PROFILE_REWARM_S)
        if prof.product_gflops is None:
            return {}
        rows.append((prof.product_gflops, ref, prof.product_gflops / ref, _product_share(prof)))
    med = [statistics.median(col) for col in zip(*rows)]
    return {"product_GFLOPs": med[0], "product_kernels": len(prof.float_products), "product_share": med[3],
            "numpy_unset_GFLOPs": med[1], "product_fraction_of_numpy_unset": med[2],
            "product_fraction_of_numpy_unset_range": [min(x[2] for x in rows), max(x[2] for x in rows)],
            "product_rounds": rounds}


def _product_share(prof):
    return prof.product_seconds / prof.seconds if prof.seconds > 0 else None


PEERS = {"numpy": NumpySystem, "jax": JaxSystem, "torch": TorchSystem,
         "torch.compile": TorchCompileSystem, "torch.compile-ro": TorchCompileReduceOverheadSystem,
         "iree": IreeSystem}
GPU_ONLY = {"torch.compile-ro"}


def make_systems(names: Optional[list], targets: list, gpu: bool, quick: bool) -> list:
    """Systems in table order: the named peers (all if None; without numpy when ``gpu``) and, when
    ``hlo`` is named or names are None, one hlo system per target."""
    # numpy on the host only times the host CPU in a GPU run; it runs there when named
    # torch.compile-ro (CUDA graphs) is a GPU peer: it runs on --gpu runs, or when named
    wanted = names or [n for n in PEERS if not (gpu and n == "numpy") and (gpu or n not in GPU_ONLY)] + ["hlo"]
    aliases = {"jax.jit": "jax", "torch-eager": "torch", "torch_compile": "torch.compile",
               "torch-compile": "torch.compile", "inductor": "torch.compile",
               "torch.compile-reduce-overhead": "torch.compile-ro", "torch-compile-ro": "torch.compile-ro"}
    wanted = [aliases.get(n, n) for n in wanted]
    unknown = [n for n in wanted if n not in PEERS and n not in ("hlo", "c")]
    if unknown:
        raise SystemExit(f"unknown system(s) {', '.join(unknown)}; known: {', '.join(PEERS)}, hlo, c")
    out = [PEERS[n](gpu, quick) for n in PEERS if n in wanted]
    if "hlo" in wanted:
        out += [HloSystem(gpu, quick, t) for t in targets]
    # the c row (the export to C, run from C) beside hlo:cpu, or where named
    if "c" in wanted or ("hlo" in wanted and "cpu" in targets and not gpu):
        from bench.c_system import CSystem
        out.append(CSystem(gpu, quick))
    return out
