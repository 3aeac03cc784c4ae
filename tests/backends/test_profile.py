"""The in-program profile of a CPU build (``compile(profile=True)``): its results are the
unprofiled build's, its counts are the number of calls times the runs of each step (a loop's
steps once per iteration), its times are positive and within the calls' wall time, a product
kernel's FLOPs are 2*B*M*K*N, an unprofiled build's code is untouched, the flag is in the
compilation cache's key, a saved profiled build profiles when loaded, and other targets refuse
it."""
import re
import threading
import time

import numpy as np
import pytest

import hlo
import hlo.numpy as hnp
from hlo import aot, config
from hlo.errors import UnsupportedError
from hlo.runtime.cpu.profile import NotProfiledError
from hlo.runtime.hlox import CorruptFileError
from hlo.staging import cache as cc
from hlo.staging.targets import compile_options

RNG = np.random.default_rng(0)


def mlp(x, w1, w2):
    h = hnp.maximum(x @ w1, 0.0)
    return hnp.tanh(h @ w2), h.sum(axis=0)


MLP_ARGS = [RNG.standard_normal(s).astype(np.float32) for s in ((64, 96), (96, 80), (80, 48))]


def loop(n, x):
    def body(c):
        i, v = c
        return i + 1, hnp.sin(v) * 0.5 + v.sum() * 1e-3
    return hlo.lax.while_loop(lambda c: c[0] < n, body, (hnp.int32(0), x))[1]


def profiled_and_plain(fn, args):
    low = hlo.jit(fn).lower(*args)
    return low.compile(profile=True), low.compile()


def test_results_equal_the_unprofiled_build_and_counts_are_calls():
    prof, plain = profiled_and_plain(mlp, MLP_ARGS)
    for a, b in zip(prof(*MLP_ARGS), plain(*MLP_ARGS)):
        np.testing.assert_array_equal(a, b)
    prof.reset_profile()
    p = prof.profile()
    assert p.calls == 0 and all(s.calls == 0 and s.seconds == 0 for s in p.steps)
    t0 = time.perf_counter()
    for _ in range(7):
        prof(*MLP_ARGS)
    wall = time.perf_counter() - t0
    p = prof.profile()
    assert p.calls == 7 and p.steps
    assert all(s.calls == 7 and s.seconds > 0 and s.where == "" for s in p.steps)
    assert 0 < sum(s.seconds for s in p.steps) <= p.seconds <= wall
    report = prof.profile_report()
    assert "7 call(s)" in report and "sum of steps" in report and "GFLOP/s" in report


def test_a_product_kernel_has_its_dot_flops():
    prof, _ = profiled_and_plain(mlp, MLP_ARGS)
    for _ in range(3):
        prof(*MLP_ARGS)
    p = prof.profile()
    flops = sorted(s.flops for s in p.products)
    assert flops == sorted([2 * 64 * 96 * 80, 2 * 64 * 80 * 48])
    assert all(s.name.startswith("k.gemm") and "dot_general" in s.what for s in p.products)
    assert all(s.flops == 0 for s in p.steps if s not in p.products)
    for s in p.products:
        assert s.gflops == pytest.approx(s.flops * 3 / s.seconds / 1e9)
    total = sum(s.flops * s.calls for s in p.products) / sum(s.seconds for s in p.products) / 1e9
    assert p.product_gflops == pytest.approx(total)


def test_batched_product_flops():
    a = RNG.standard_normal((3, 16, 24)).astype(np.float32)
    b = RNG.standard_normal((3, 24, 40)).astype(np.float32)
    prof = hlo.jit(lambda a, b: hnp.matmul(a, b)).lower(a, b).compile(profile=True)
    np.testing.assert_allclose(prof(a, b), np.matmul(a.astype(np.float64), b), rtol=1e-4, atol=1e-4)
    assert [s.flops for s in prof.profile().products] == [2 * 3 * 16 * 24 * 40]


def test_the_sum_of_a_split_products_parts_counts_as_product_time():
    """A product split along its contraction (by hand here; pass dot-split-k does it the same
    way) and the kernel that sums its parts: the sum's time counts as the product's. A kernel
    that reads one part only, or the parts through something other than slices, is not a sum."""
    x = RNG.standard_normal((4, 64)).astype(np.float32)
    w = RNG.standard_normal((64, 48)).astype(np.float32)
    b = RNG.standard_normal(48).astype(np.float32)

    def split(x, w, b):
        p = hnp.transpose(hnp.reshape(x, (4, 2, 32)), (1, 0, 2)) @ hnp.reshape(w, (2, 32, 48))
        return hnp.tanh(p[0] + p[1] + b)

    prof = hlo.jit(split).lower(x, w, b).compile(profile=True)
    got = prof(x, w, b)
    np.testing.assert_allclose(got, np.tanh(x.astype(np.float64) @ w + b), rtol=1e-4, atol=1e-5)
    p = prof.profile()
    sums = p.split_sums
    assert len(sums) == 1 and not sums[0].flops and sums[0].calls == 1, p.report()
    assert not any(s.split_sum for s in p.steps if s is not sums[0])
    assert p.product_seconds == pytest.approx(sum(s.seconds for s in p.products) + sums[0].seconds)
    assert p.product_gflops == pytest.approx(2 * 4 * 64 * 48 * p.calls / p.product_seconds / 1e9)
    assert "1 split-K sum(s)" in p.report()
    one = hlo.jit(lambda x, w: hnp.exp((hnp.transpose(hnp.reshape(x, (4, 2, 32)), (1, 0, 2))
                                        @ hnp.reshape(w, (2, 32, 48)))[1])).lower(x, w).compile(profile=True)
    one(x, w)
    assert not one.profile().split_sums


def test_an_integer_product_has_no_flops():
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    prof = hlo.jit(lambda a: a @ a.T).lower(a).compile(profile=True)
    np.testing.assert_array_equal(prof(a), a @ a.T)
    assert [(s.gemm, s.flops) for s in prof.profile().products] == [((1, 3, 4, 3), 0)]
    assert prof.profile().product_gflops is None


@pytest.mark.parametrize("n", [1, 5])
def test_a_loop_body_step_counts_once_per_iteration(n):
    x = RNG.standard_normal(4096).astype(np.float32)
    nn = np.int32(n)
    prof, plain = profiled_and_plain(loop, [nn, x])
    np.testing.assert_array_equal(prof(nn, x), plain(nn, x))
    prof.reset_profile()
    calls = 3
    for _ in range(calls):
        prof(nn, x)
    p = prof.profile()
    body = [s for s in p.steps if s.where.endswith(".body")]
    cond = [s for s in p.steps if s.where.endswith(".cond")]
    top = [s for s in p.steps if not s.where]
    assert body and p.calls == calls
    assert all(s.calls == calls * n for s in body)
    assert all(s.calls == calls * (n + 1) for s in cond)
    assert all(s.calls == calls for s in top)
    assert sum(s.seconds for s in p.steps) <= p.seconds


def test_concurrent_calls_count_exactly():
    prof, _ = profiled_and_plain(mlp, MLP_ARGS)
    prof.reset_profile()

    def work():
        for _ in range(25):
            prof(*MLP_ARGS)
    ts = [threading.Thread(target=work) for _ in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    p = prof.profile()
    assert p.calls == 75 and all(s.calls == 75 for s in p.steps)


def test_a_parallel_kernel_is_timed_around_the_pool():
    x = RNG.standard_normal((1024, 1024)).astype(np.float32)
    low = hlo.jit(lambda x: hnp.exp(x) * 2.0 + 1.0).lower(x)
    prof = low.compile(profile=True)
    assert " parallel " in prof._artifact.executable.steps_text
    prof(x)
    (step,) = prof.profile().steps
    assert step.calls == 1 and 0 < step.seconds <= prof.profile().seconds


def _functions(ir_text):
    """name -> text of each function definition of an LLVM module's text."""
    return {m.group(1): m.group(0)
            for m in re.finditer(r"^define [^@]*@\"?([\w.$]+)\"?\(.*?^}", ir_text, re.M | re.S)}


def test_an_unprofiled_build_has_no_profiling_code_and_the_kernels_are_the_same():
    with config.override(cache=False):  # a cache hit keeps no LLVM IR
        prof, plain = profiled_and_plain(mlp, MLP_ARGS)
    ir_p, ir_u = prof._artifact.executable.ir_text, plain._artifact.executable.ir_text
    for token in ("clock_gettime", "hlo_profile", "atomicrmw"):
        assert token not in ir_u and token in ir_p
    assert "profile" not in plain._artifact.executable.manifest
    fp, fu = _functions(ir_p), _functions(ir_u)
    # the profiled build adds only a wrapper per parallel kernel's task, which times each chunk
    # on its worker (the timeline's spans) and calls the task itself
    wrappers = {k: v for k, v in fp.items() if re.fullmatch(r".+\.task\.timed\d+", k)}
    assert wrappers, list(fp)
    for k, v in wrappers.items():
        assert k.rsplit(".timed", 1)[0] in fu and f'@"{k.rsplit(".timed", 1)[0]}"(' in v, v
    fp = {k: v for k, v in fp.items() if k not in wrappers}
    assert "hlo_run" in fu and len(fu) >= 4 and set(fp) == set(fu)
    assert {k: v for k, v in fp.items() if k != "hlo_run"} == {k: v for k, v in fu.items() if k != "hlo_run"}
    with pytest.raises(NotProfiledError, match="profile=True"):
        plain.profile()
    with pytest.raises(NotProfiledError):
        plain.reset_profile()


def test_an_explicit_profile_false_compiles_the_same_code():
    low = hlo.jit(mlp).lower(*MLP_ARGS)
    with config.override(cache=False):
        a = low.compile()._artifact.executable.ir_text
        b = low.compile(profile=False)._artifact.executable.ir_text
    assert a == b


def test_the_profile_flag_is_in_the_cache_key(tmp_path):
    with config.override(cache_dir=str(tmp_path / "cache"), cache=True):
        low = hlo.jit(mlp).lower(*MLP_ARGS)
        plain = low.compile()
        assert not plain.from_cache
        prof = low.compile(profile=True)  # not the unprofiled entry
        assert not prof.from_cache
        assert len(list((tmp_path / "cache" / cc.LAYOUT).glob("*.hlox"))) == 2
        hit = low.compile(profile=True)
        again = low.compile()
        assert hit.from_cache and again.from_cache
        hit(*MLP_ARGS)
        assert hit.profile().calls == 1
        with pytest.raises(NotProfiledError):
            again.profile()
        parts = [cc.make_key(low.ir, "cpu", o).parts["options"]
                 for o in (compile_options(), compile_options(profile=True))]
        assert parts[0] != parts[1] and "profile" not in parts[0]


def test_a_saved_profiled_build_profiles_when_loaded():
    prof, _ = profiled_and_plain(mlp, MLP_ARGS)
    loaded = aot.loads(aot.dumps(prof))
    for a, b in zip(loaded(*MLP_ARGS), prof(*MLP_ARGS)):
        np.testing.assert_array_equal(a, b)
    loaded(*MLP_ARGS)
    p, q = loaded.profile(), prof.profile()
    assert p.calls == 2 and q.calls == 1  # separate counters
    assert [(s.name, s.op, s.flops) for s in p.steps] == [(s.name, s.op, s.flops) for s in q.steps]
    loaded.reset_profile()
    assert loaded.profile().calls == 0


def test_a_malformed_profile_record_is_a_corrupt_file():
    import json

    from hlo.runtime import hlox
    prof, _ = profiled_and_plain(mlp, MLP_ARGS)
    payload = hlox.loads(aot.dumps(prof))
    payload.manifest["runtime"]["profile"]["steps"][0]["flops"] = "many"
    with pytest.raises(CorruptFileError, match=r"runtime\.profile\.steps\[0\]\.flops"):
        aot.loads(hlox.dumps(payload))
    assert json.dumps(payload.manifest)  # still JSON: the schema, not the parser, refused it


def test_the_interpreter_refuses_to_profile():  # (cuda profiles: tests/cuda/test_cuda_profile.py)
    low = hlo.jit(mlp).lower(*MLP_ARGS)
    with pytest.raises(UnsupportedError, match="is for targets 'cpu' and 'cuda'"):
        low.compile("interpreter", profile=True)


def test_the_gemm_profile_tool_reports_the_products_next_to_numpy():
    from hlo.backends.cpu.gemm_profile import numpy_report, numpy_rows, profile_calls
    prof = hlo.jit(mlp).lower(*MLP_ARGS).compile(profile=True)
    p = profile_calls(prof, MLP_ARGS, min_time=0.0, min_calls=4)
    assert p.calls == 4
    rows = numpy_rows(p, min_time=0.0)
    assert sorted(s.gemm for s, _ in rows) == [(1, 64, 80, 48), (1, 64, 96, 80)]
    assert all(t > 0 for _, t in rows)
    assert "gemm[1x64x96x80] f32" in numpy_report(rows)
