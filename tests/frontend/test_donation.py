"""Donation that cannot corrupt or crash (issue 35): a donated argument is written in place only
when it is writable memory numpy (or hlo's output pool) owns and shares no byte with another
argument; then the result IS that memory. Otherwise the call declines (a DonationWarning naming
the argument and why) and works on a copy. Every call path: the first call, the Python fast
path, the native entry, ``Compiled``, a loaded ``.hlox``, pytrees and keywords."""
import mmap
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hlo
import hlo.numpy as hnp
from hlo.ir.errors import DonationWarning
from hlo.runtime import donation
from hlo.runtime.cpu import pycall

N = 1000


def flip_add(a, b):
    return a + hnp.flip(b, 0)


@pytest.fixture(scope="module")
def f():
    return hlo.jit(flip_add, donate_argnums=0, target="cpu")


def expected(a, b):
    return np.asarray(a, np.float32) + np.asarray(b, np.float32)[::-1]


def call_declined(fn, *args, match, **kw):
    with pytest.warns(DonationWarning, match=match):
        return fn(*args, **kw)


def call_quiet(fn, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("error", DonationWarning)
        return fn(*args, **kw)


# -- the probe's reproducers ------------------------------------------------------------------

def test_same_array_twice_first_fast_and_native_calls(f):
    f.clear_cache()
    for call in range(4):  # the first call, the Python fast path, then the native entry
        x = np.arange(N, dtype=np.float32)
        r = call_declined(f, x, x, match=r"donated argument a \(f32\[1000\]\) .*shares memory with argument b")
        np.testing.assert_array_equal(r, np.full(N, N - 1, np.float32))
        np.testing.assert_array_equal(x, np.arange(N, dtype=np.float32))  # not written
        assert not np.shares_memory(r, x)


def test_the_native_entry_hands_an_aliased_call_to_the_python_path(f):
    f.clear_cache()
    x, y = np.arange(N, dtype=np.float32), np.ones(N, np.float32)
    call_quiet(f, x, y)
    call_quiet(f, np.arange(N, dtype=np.float32), y)
    assert f._native is not None
    hits = pycall.hits(f._native)
    x = np.arange(N, dtype=np.float32)
    r = call_declined(f, x, x, match="shares memory")
    assert pycall.hits(f._native) == hits  # fell back
    np.testing.assert_array_equal(r, expected(np.arange(N), np.arange(N)))
    x = np.arange(N, dtype=np.float32)
    r = call_quiet(f, x, y)
    assert pycall.hits(f._native) == hits + 1 and r is x


def test_overlapping_slices_and_views(f):
    base = np.arange(2 * N, dtype=np.float32)
    a, b = base[:N], base[N // 2:N // 2 + N]
    want = expected(a.copy(), b.copy())
    r = call_declined(f, a, b, match="shares memory with argument b")
    np.testing.assert_array_equal(r, want)
    np.testing.assert_array_equal(base, np.arange(2 * N, dtype=np.float32))
    # disjoint slices of one array: used in place
    base = np.arange(2 * N, dtype=np.float32)
    a, b = base[:N], base[N:]
    want = expected(a.copy(), b.copy())
    r = call_quiet(f, a, b)
    np.testing.assert_array_equal(r, want)
    assert r is a and np.shares_memory(r, base)
    np.testing.assert_array_equal(base[N:], np.arange(N, 2 * N, dtype=np.float32))


def test_read_only_arrays_are_not_written(f):
    x = np.arange(N, dtype=np.float32)
    x.flags.writeable = False
    y = np.ones(N, np.float32)
    for _ in range(3):
        r = call_declined(f, x, y, match=r"donated argument a .*read-only")
        np.testing.assert_array_equal(r, expected(np.arange(N), y))
        np.testing.assert_array_equal(x, np.arange(N, dtype=np.float32))


def test_frombuffer_over_bytes_and_bytearray(f):
    raw = np.arange(N, dtype=np.float32).tobytes()
    x = np.frombuffer(raw, np.float32)
    y = np.ones(N, np.float32)
    r = call_declined(f, x, y, match="read-only")
    np.testing.assert_array_equal(r, expected(np.arange(N), y))
    assert raw == np.arange(N, dtype=np.float32).tobytes()
    buf = bytearray(np.arange(N, dtype=np.float32).tobytes())
    x = np.frombuffer(buf, np.float32)  # writable, but the bytearray's memory
    assert x.flags.writeable
    r = call_declined(f, x, y, match="buffer of a bytearray")
    np.testing.assert_array_equal(r, expected(np.arange(N), y))
    assert bytes(buf) == np.arange(N, dtype=np.float32).tobytes()


@pytest.mark.parametrize("mode", ["r", "r+", "c"])
def test_memmap_is_never_written(f, tmp_path, mode):
    # a donated read-only np.memmap killed the process (SIGSEGV)
    path = tmp_path / "m.bin"
    np.arange(N, dtype=np.float32).tofile(path)
    m = np.memmap(path, np.float32, mode, shape=(N,))
    y = np.ones(N, np.float32)
    for x in (m, np.asarray(m), m[:]):
        r = call_declined(f, x, y, match="memmap|memory-mapped|read-only")
        np.testing.assert_array_equal(r, expected(np.arange(N), y))
    del m, x
    np.testing.assert_array_equal(np.fromfile(path, np.float32), np.arange(N, dtype=np.float32))


def test_mmap_buffer(f):
    mm = mmap.mmap(-1, N * 4)
    x = np.frombuffer(mm, np.float32)
    x[:] = np.arange(N)
    r = call_declined(f, x, np.ones(N, np.float32), match="mmap")
    np.testing.assert_array_equal(r, np.arange(N) + 1)
    np.testing.assert_array_equal(x, np.arange(N, dtype=np.float32))
    del x, r
    mm.close()


def test_used_donation_returns_the_donated_memory(f):
    """A writable input of numpy's own is used in place, and the result is that array (the
    probe found it overwritten while the result was a separate copy)."""
    f.clear_cache()
    y = np.ones(N, np.float32)
    for call in range(4):
        x = np.arange(N, dtype=np.float32)
        r = call_quiet(f, x, y)
        assert r is x
        np.testing.assert_array_equal(r, np.arange(N) + 1)
    c = f.lower(x, y).compile()
    before = c.donation_stats()
    x = np.arange(N, dtype=np.float32)
    assert call_quiet(c, x, y) is x
    x2 = np.arange(N, dtype=np.float32)
    r = call_declined(c, x2, x2, match="shares memory")
    assert not np.shares_memory(r, x2)
    st_ = c.donation_stats()
    assert st_["used"] >= before["used"] + 1 and st_["declined"] == before["declined"] + 1
    assert st_["aliased_bytes"] >= before["aliased_bytes"] + 2 * 4 * N
    assert "a" in st_["last_declined"] and "shares memory" in st_["last_declined"]["a"]
    assert c.memory_analysis().alias_size_in_bytes == 4 * N


def test_pool_outputs_donated_back_in_a_loop():
    """x = f(x): a result from the recycled-output pool (its base an ``output_pool._Block``) is
    hlo's own memory: donated again, it is used in place (native entry and Python path)."""
    n = 1 << 19  # 2 MiB: from the pool
    f = hlo.jit(lambda x: x * 2.0 + 1.0, donate_argnums=0, target="cpu")
    x = np.zeros(n, np.float32)
    first = x
    for _ in range(5):
        x = call_quiet(f, x)
    assert x is first  # every call reused the same memory
    np.testing.assert_array_equal(x[:4], np.full(4, 31, np.float32))
    g = hlo.jit(lambda x: x * 2.0 + 1.0, target="cpu")  # not donated: results from the pool
    p = g(np.zeros(n, np.float32))
    assert type(p.base).__name__ == "_Block"
    r = call_quiet(f, p)
    assert r is p


def test_pytrees_and_keywords(f):
    g = hlo.jit(lambda d, b: d["w"] + hnp.flip(b, 0) + d["v"], donate_argnums=0, target="cpu")
    for _ in range(2):
        x = np.arange(N, dtype=np.float32)
        v = np.zeros(N, np.float32)
        r = call_declined(g, {"w": x, "v": v}, x, match=r"donated argument d\['w'\] .*argument b")
        np.testing.assert_array_equal(r, np.full(N, N - 1, np.float32))
        np.testing.assert_array_equal(x, np.arange(N, dtype=np.float32))
        # one pytree leaf aliasing another leaf of the same donated tree
        r = call_declined(g, {"w": x, "v": x}, np.zeros(N, np.float32), match=r"d\['v'\]|d\['w'\]")
        np.testing.assert_array_equal(r, 2 * np.arange(N, dtype=np.float32))
        np.testing.assert_array_equal(x, np.arange(N, dtype=np.float32))
    for _ in range(2):  # the aliasing argument passed by keyword
        x = np.arange(N, dtype=np.float32)
        r = call_declined(f, x, b=x, match="shares memory with argument b")
        np.testing.assert_array_equal(r, np.full(N, N - 1, np.float32))
        np.testing.assert_array_equal(x, np.arange(N, dtype=np.float32))


def test_loaded_executable(f, tmp_path):
    y = np.ones(N, np.float32)
    x = np.arange(N, dtype=np.float32)
    path = tmp_path / "f.hlox"
    f.lower(x, y).compile().save(path)
    g = hlo.load(path)
    for _ in range(4):  # the Python path, then the native entry
        x = np.arange(N, dtype=np.float32)
        r = call_declined(g, x, x, match=r"donated argument a .*argument b")
        np.testing.assert_array_equal(r, np.full(N, N - 1, np.float32))
        np.testing.assert_array_equal(x, np.arange(N, dtype=np.float32))
        x = np.arange(N, dtype=np.float32)
        r = call_quiet(g, x, y)
        assert r is x
        ro = np.arange(N, dtype=np.float32)
        ro.flags.writeable = False
        r = call_declined(g, ro, y, match="read-only")
        np.testing.assert_array_equal(ro, np.arange(N, dtype=np.float32))
    assert g.donation_stats()["declined"] == 8
    m = g.executable.manifest
    assert m["aliases"] == [[0, 0]] and m["inputs_written"] == [0]


def test_two_donated_arguments_that_alias_each_other():
    g = hlo.jit(lambda a, b: (a + 1.0, b * 2.0), donate_argnums=(0, 1), target="cpu")
    y = np.arange(N, dtype=np.float32)
    r0, r1 = call_quiet(g, y, y.copy())
    assert r0 is y  # both used in place when they are apart
    for _ in range(3):
        x = np.arange(N, dtype=np.float32)
        want = (x + 1, x * 2)
        r0, r1 = call_declined(g, x, x, match=r"argument a .*shares memory with argument b")
        np.testing.assert_array_equal(r0, want[0])
        np.testing.assert_array_equal(r1, want[1])
        # one of the two was copied; the other may be written in place, never both
        assert not (np.shares_memory(r0, x) and np.shares_memory(r1, x))


def test_output_of_another_shape_views_the_donated_memory():
    g = hlo.jit(lambda x: (hnp.cumsum(x, 0) * 2.0).reshape(4, N // 4), donate_argnums=0, target="cpu")
    for _ in range(3):
        x = np.arange(N, dtype=np.float32)
        r = call_quiet(g, x)
        np.testing.assert_array_equal(r, (np.cumsum(np.arange(N, dtype=np.float32)) * 2).reshape(4, N // 4))
        assert r.shape == (4, N // 4) and np.shares_memory(r, x)


def test_strided_donated_argument_is_declined_not_written(f):
    base = np.arange(2 * N, dtype=np.float32)
    x = base[::2]
    y = np.ones(N, np.float32)
    r = call_declined(f, x, y, match="not C-contiguous")
    np.testing.assert_array_equal(r, base[::2] + 1)
    np.testing.assert_array_equal(base, np.arange(2 * N, dtype=np.float32))


# -- properties over aliasing patterns ---------------------------------------------------------

M = 16
def _g(a, b, c):
    return a * 2.0 + hnp.flip(b, 0), c * 3.0 - hnp.flip(b, 0)


_G = hlo.jit(_g, donate_argnums=(0, 2), target="cpu")
_REF = hlo.jit(_g, target="cpu")
_G_COMPILED = []


@st.composite
def aliasing_args(draw):
    """Three f32[M] arguments cut from one or two buffers: the same array, overlapping or
    disjoint slices, reversed or strided views, read-only views, frombuffer over bytes."""
    bufs = [np.arange(3 * M, dtype=np.float32) * (k + 1) for k in range(2)]
    args, kinds = [], []
    for _ in range(3):
        kind = draw(st.sampled_from(["slice", "same", "reversed", "strided", "readonly", "bytes", "fresh"]))
        buf = bufs[draw(st.integers(0, 1))]
        off = draw(st.integers(0, M))
        if kind == "slice":
            a = buf[off:off + M]
        elif kind == "same" and args:
            a = args[draw(st.integers(0, len(args) - 1))]
        elif kind == "reversed":
            a = buf[off:off + M][::-1]
        elif kind == "strided":
            a = buf[off // 2:off // 2 + 2 * M:2]
        elif kind == "readonly":
            a = buf[off:off + M].view()
            a.flags.writeable = False
        elif kind == "bytes":
            a = np.frombuffer(buf[off:off + M].tobytes(), np.float32)
        else:
            a = np.arange(M, dtype=np.float32) - off
        args.append(a)
        kinds.append(kind)
    return bufs, args, kinds


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(aliasing_args(), st.sampled_from(["positional", "keyword", "compiled"]))
def test_donation_matches_the_undonated_result(case, how):
    bufs, args, kinds = case
    copies = [np.array(a) for a in args]
    want = _REF(*copies)
    before = [b.copy() for b in bufs]
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always", DonationWarning)
        if how == "positional":
            got = _G(*args)
        elif how == "keyword":
            got = _G(args[0], args[1], c=args[2])
        else:
            if not _G_COMPILED:
                _G_COMPILED.append(_G.lower(*copies).compile())
            got = _G_COMPILED[0](*args)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    declined = {str(w.message).split(" ")[2] for w in seen if issubclass(w.category, DonationWarning)}
    if not _G_COMPILED:
        _G_COMPILED.append(_G.lower(*copies).compile())
    exe = _G_COMPILED[0]._artifact.executable
    assert exe.aliases == {0: 0, 1: 2}
    written = set(exe.inputs_written)  # the donated inputs the program writes (a, c or both)
    if how == "keyword":
        written.discard(2)  # c passed by keyword is not donated (donate_argnums is positional)
    aliases = {k: o for o, k in exe.aliases.items()}
    used = [k for k in written if "abc"[k] not in declined]
    # nothing but a used donated argument's own bytes is written
    for buf, old in zip(bufs, before):
        mask = np.ones(buf.shape, bool)
        for k in used:
            if np.shares_memory(args[k], buf):
                off = (args[k].__array_interface__["data"][0] - buf.__array_interface__["data"][0]) // 4
                mask[off:off + M] = False
        np.testing.assert_array_equal(buf[mask], old[mask])
    for k in range(3):
        if k not in used:  # written only when used in place
            np.testing.assert_array_equal(args[k], copies[k]) if not any(
                np.shares_memory(args[k], args[u]) for u in used) else None
        if k in used and k in aliases:  # used in place: its result is its memory
            assert got[aliases[k]] is args[k]
        if k not in used:  # declined or not donated: no result is its memory (but where a
            # used argument's memory, which is its result, overlaps it)
            assert all(any(g is args[u] for u in used) for g in got if np.shares_memory(g, args[k]))
    for k in written:  # memory that may not be written is always declined
        if kinds[k] in ("readonly", "bytes", "reversed", "strided"):
            assert "abc"[k] in declined, (kinds, declined)


# -- the checks themselves ---------------------------------------------------------------------

def test_unusable_reasons():
    a = np.zeros(8, np.float32)
    assert donation.unusable(a) is None and donation.unusable(a[2:]) is None
    r = a.view()
    r.flags.writeable = False
    assert "read-only" in donation.unusable(r)
    assert "bytearray" in donation.unusable(np.frombuffer(bytearray(32), np.float32))
    assert "read-only" in donation.unusable(np.frombuffer(bytes(32), np.float32))


def test_declined_ranges():
    # (address, bytes) per input; None: a private copy
    r = donation.declined_ranges([(0, 16), (8, 16), None], [0], [True, True, True], ["a", "b", "c"])
    assert r == {0: "it shares memory with argument b"}
    assert donation.declined_ranges([(0, 16), (16, 16)], [0, 1], [True, True]) == {}
    r = donation.declined_ranges([(0, 16), (0, 16)], [0, 1], [True, True])
    assert list(r) == [0]  # the first is copied; then the second overlaps nothing
    assert "another library" in donation.declined_ranges([(0, 16)], [0], [False])[0]
    assert donation.declined_ranges([(0, 0), (0, 16)], [0], [True, True]) == {}  # no bytes


def test_a_manifest_from_before_inputs_written(f):
    """A file saved before the runtime knew which inputs its code writes: every donated argument
    is assumed written, the checks hold, and its native entry (which does not check) is unused."""
    from hlo.runtime.cpu.executable import Executable
    y = np.ones(N, np.float32)
    exe = f.lower(y, y).compile()._artifact.executable
    m = {k: v for k, v in exe.manifest.items() if k != "inputs_written"}
    old = Executable(exe.object_code, m, cores=exe.core_objects, donated=[0])
    assert old.inputs_written == (0,)
    assert old.native_call(lambda *a: None, "single") is None
    x = np.arange(N, dtype=np.float32)
    with pytest.warns(DonationWarning, match="shares memory"):
        r = old(x, x)[0]
    np.testing.assert_array_equal(r, np.full(N, N - 1, np.float32))
    np.testing.assert_array_equal(x, np.arange(N, dtype=np.float32))
