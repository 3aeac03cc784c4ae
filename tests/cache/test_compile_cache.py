"""The persistent compilation cache (``hlo.staging.cache``): hits across processes, the named
key parts and their explanations, source locations, corrupted entries, switches, eviction and
atomic writes. Every test uses its own temporary cache folder."""
import json
import os
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import hlo
import hlo.numpy as hnp
from hlo import config
from hlo.runtime import hlox
from hlo.staging import cache as cc


@pytest.fixture
def cache(tmp_path):
    d = tmp_path / "cache"
    with config.override(cache_dir=str(d), cache=True):
        yield d


def entries(d):
    p = d / cc.LAYOUT
    return sorted(p.glob("*.hlox")) if p.exists() else []


def f(x, w):
    return hnp.tanh(x @ w) + 1.0


X = (np.arange(32, dtype=np.float32).reshape(4, 8) / 32.0)
W = np.linspace(-1, 1, 24, dtype=np.float32).reshape(8, 3)


def artifact(jf, *args):
    return jf.lower(*args).compile()._artifact


def test_hit_in_process_matches_a_fresh_compile(cache):
    fresh = hlo.jit(f).lower(X, W).compile()
    assert not isinstance(fresh._artifact, cc.CachedArtifact) and not fresh.from_cache
    assert len(entries(cache)) == 1
    hit = hlo.jit(f).lower(X, W).compile()
    assert isinstance(hit._artifact, cc.CachedArtifact) and hit.from_cache
    np.testing.assert_array_equal(hit(X, W), fresh(X, W))
    np.testing.assert_allclose(hit(X, W), np.tanh(X.astype(np.float64) @ W) + 1.0, rtol=1e-5)
    assert hit.as_text() == fresh.as_text()
    assert hit.cost_analysis() == fresh.cost_analysis()
    hm, fm = hit.memory_analysis(), fresh.memory_analysis()
    for k in ("argument_size_in_bytes", "output_size_in_bytes", "temp_size_in_bytes",
              "alias_size_in_bytes", "constant_size_in_bytes"):
        assert getattr(hm, k) == getattr(fm, k)
    # a hit can be saved again, buffer plan included
    path = cache.parent / "again.hlox"
    hit.save(str(path))
    assert hlo.load(str(path)).manifest["buffer_plan"]["text"]
    assert hlo.explain_cache_miss(f, X, W).startswith("cache hit")


def test_key_parts_name_what_differs(cache, monkeypatch):
    hlo.jit(f).lower(X, W).compile()
    assert hlo.explain_cache_miss(hlo.jit(f), X, W).startswith("cache hit")

    msg = hlo.explain_cache_miss(f, X[:2], W)
    assert msg.startswith("cache miss") and "differs in program:" in msg and "f32[2,8]" in msg

    msg = hlo.explain_cache_miss(hlo.jit(f, donate_argnums=0), X, W)
    assert "differs in options:" in msg and "donated_args" in msg and "[0]" in msg

    with monkeypatch.context() as m:
        m.setattr(cc, "_version_part", lambda: "0.2.0 (sources 0123456789abcdef)")
        msg = hlo.explain_cache_miss(f, X, W)
        assert "differs in hlo version:" in msg and "0.2.0" in msg

    with monkeypatch.context() as m:
        real = cc._target_parts
        m.setattr(cc, "_target_parts", lambda t: dict(real(t), cpu=real(t)["cpu"] + ",+madeup-feature"))
        msg = hlo.explain_cache_miss(f, X, W)
        assert "differs in cpu:" in msg and "madeup-feature added" in msg

    with monkeypatch.context() as m:
        m.setenv("HLO_CPU_GEMM", "generated")
        msg = hlo.explain_cache_miss(f, X, W)
        assert "differs in environment:" in msg and "HLO_CPU_GEMM=generated" in msg

    with monkeypatch.context() as m:
        # a thread count other than this machine's (HLO_CPU_THREADS can only lower it, so a
        # one-core machine gets a pretend second core)
        import hlo.runtime.cpu.target as cpu_target
        other = 2 if cpu_target.default_threads() == 1 else 1
        m.setattr(cpu_target, "default_threads", lambda: other)
        msg = hlo.explain_cache_miss(f, X, W)
        assert "differs in environment:" in msg and f"threads={other}" in msg

    # a donated compile is a hit for the same donation: compile and explain use one options dict
    hlo.jit(f, donate_argnums=0).lower(X, W).compile()
    assert hlo.explain_cache_miss(hlo.jit(f, donate_argnums=0), X, W).startswith("cache hit")

    # the target part: the cache holds only the cpu entry; a key for another target
    key = cc.make_key(hlo.jit(f).lower(X, W).ir, "cpu", {})
    key.parts["target"] = "cuda"
    cands = cc._candidates(key, same_program_only=True)
    assert "differs in target: target: cpu -> cuda" in cc._explain(key, cands)

    assert hlo.explain_cache_miss(hlo.jit(f, target="interpreter"), X, W).startswith(
        "not cached: the interpreter target")


def test_recompile_log_names_the_differing_part(cache, caplog):
    import logging

    from hlo.passes.buffer_assignment import DonationWarning
    hlo.jit(f).lower(X, W).compile()
    with config.override(log_recompiles=True), caplog.at_level(logging.WARNING, logger="hlo.cache"):
        with pytest.warns(DonationWarning, match="donated argument 1"):
            hlo.jit(f, donate_argnums=1).lower(X, W).compile()
    msgs = [r.getMessage() for r in caplog.records if r.name == "hlo.cache"]
    assert len(msgs) == 1 and "differs in options" in msgs[0]
    # a hit issues the compile's warnings again
    with pytest.warns(DonationWarning, match="donated argument 1 .* is not reused"):
        c = hlo.jit(f, donate_argnums=1).lower(X, W).compile()
    assert isinstance(c._artifact, cc.CachedArtifact)


def _write_module(tmp_path, name, body):
    p = tmp_path / f"{name}.py"
    p.write_text(textwrap.dedent(body))
    import importlib.util
    spec = importlib.util.spec_from_file_location(f"cache_test_{name}", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_locations_do_not_change_the_key_and_follow_the_source(cache, tmp_path):
    a = _write_module(tmp_path, "moda", '''
        import hlo.numpy as hnp

        def g(x):
            y = hnp.exp(x)
            return y * 2.0
    ''')
    b = _write_module(tmp_path, "modb", '''
        import hlo.numpy as hnp
        # moved down by a few lines
        #
        #

        def g(x):
            y = hnp.exp(x)
            return y * 2.0
    ''')
    x = np.ones((3, 5), np.float32)
    ca = hlo.jit(a.g).lower(x).compile()
    cb = hlo.jit(b.g).lower(x).compile()
    assert isinstance(cb._artifact, cc.CachedArtifact)
    text = cb.as_text()
    assert 'loc("modb.py":7)' in text and 'loc("modb.py":8)' in text and "moda.py" not in text
    with config.override(cache=False):
        assert hlo.jit(b.g).lower(x).compile().as_text() == text  # as if compiled here
    np.testing.assert_array_equal(cb(x), ca(x))

    # two ops that shared a line now sit on two lines: the stored IR cannot follow -> compile again
    c = _write_module(tmp_path, "modc", '''
        import hlo.numpy as hnp

        def g(x):
            y = hnp.exp(x); return y * 2.0
    ''')
    d = _write_module(tmp_path, "modd", '''
        import hlo.numpy as hnp

        def g(x):
            y = hnp.exp(x)
            return y * 2.0
    ''')
    z = np.ones((2, 7), np.float32)
    hlo.jit(c.g).lower(z).compile()
    assert "cannot follow" in hlo.explain_cache_miss(d.g, z)
    cd = hlo.jit(d.g).lower(z).compile()
    assert not isinstance(cd._artifact, cc.CachedArtifact)
    assert 'loc("modd.py":5)' in cd.as_text() and 'loc("modd.py":6)' in cd.as_text()


def test_the_plan_the_graph_and_the_profile_follow_the_source_too(cache, tmp_path):
    """A hit's buffer plan, graph and profile records name the lines of the function compiled
    now, not those of the one that made the entry."""
    src = """
        import hlo.numpy as hnp

        def g(x, w):
            h = hnp.tanh(x @ w)
            return h - hnp.sum(h, axis=1, keepdims=True)
    """
    a = _write_module(tmp_path, "mode", src)
    b = _write_module(tmp_path, "modf", "\n# a line\n# and another" + textwrap.dedent(src))
    ca = hlo.jit(a.g).lower(X, W).compile(profile=True)
    cb = hlo.jit(b.g).lower(X, W).compile(profile=True)
    assert isinstance(cb._artifact, cc.CachedArtifact)
    plan = cb._artifact.optimize_result.buffers.text()
    assert "(modf.py:7)" in plan and "mode.py" not in plan, plan
    assert "(mode.py:5)" in ca._artifact.optimize_result.buffers.text()
    assert "modf.py:8" in cb.as_text("dot") and "mode.py" not in cb.as_text("dot")
    cb(X, W)
    locs = {r["loc"] for r in cb.profile().records if r.get("loc")}
    assert locs and all(loc.startswith("modf.py:") for loc in locs), locs
    assert all(r.get("loc", "mode.py").startswith("mode.py") for r in ca.profile().records)


@pytest.mark.parametrize("damage", ["flip", "truncate", "garbage", "empty"])
def test_corrupted_entries_are_ignored_logged_and_replaced(cache, caplog, damage):
    import logging
    hlo.jit(f).lower(X, W).compile()
    (path,) = entries(cache)
    data = bytearray(path.read_bytes())
    if damage == "flip":
        data[len(data) // 2] ^= 0x40
    elif damage == "truncate":
        data = data[: len(data) // 3]
    elif damage == "garbage":
        data = bytearray(b"this is not an executable" * 10)
    else:
        data = bytearray()
    path.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="hlo.cache"):
        c = hlo.jit(f).lower(X, W).compile()
    assert not isinstance(c._artifact, cc.CachedArtifact)
    np.testing.assert_allclose(c(X, W), np.tanh(X.astype(np.float64) @ W) + 1.0, rtol=1e-5)
    assert any("ignoring corrupted cache entry" in r.getMessage() for r in caplog.records)
    (path2,) = entries(cache)
    assert path2 == path
    cc._read_entry(str(path2))  # replaced by a good entry
    assert isinstance(artifact(hlo.jit(f), X, W), cc.CachedArtifact)


def test_switches_and_bypasses(tmp_path, monkeypatch):
    d = tmp_path / "c"
    monkeypatch.setenv("HLO_CACHE_DIR", str(d))
    with config.override(cache=None, cache_dir=None):
        assert cc.cache_dir() == str(d)
        monkeypatch.setenv("HLO_CACHE", "0")
        hlo.jit(f).lower(X, W).compile()
        assert entries(d) == []
        assert hlo.explain_cache_miss(f, X, W).startswith("not cached: the persistent cache is off")
        monkeypatch.delenv("HLO_CACHE")
        with config.override(cache=False):
            hlo.jit(f).lower(X, W).compile()
        assert entries(d) == []
        # a dump directory: the user wants dumps, which only a real compile writes
        hlo.jit(f).lower(X, W).compile(dump_dir=str(tmp_path / "dump"))
        assert entries(d) == [] and os.listdir(tmp_path / "dump")
        monkeypatch.setenv("HLO_DUMP_DIR", str(tmp_path / "dump2"))
        hlo.jit(f).lower(X, W).compile()
        assert entries(d) == []
        monkeypatch.delenv("HLO_DUMP_DIR")
        hlo.jit(f, target="interpreter").lower(X, W).compile()
        assert entries(d) == []
        hlo.jit(f).lower(X, W).compile()
        assert len(entries(d)) == 1


def test_default_location(monkeypatch, tmp_path):
    monkeypatch.delenv("HLO_CACHE_DIR", raising=False)
    with config.override(cache_dir=None):
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
        assert cc.cache_dir() == str(tmp_path / "xdg" / "hlo")
        monkeypatch.delenv("XDG_CACHE_HOME")
        assert cc.cache_dir() == os.path.join(os.path.expanduser("~"), ".cache", "hlo")


def test_least_recently_used_entries_are_evicted(cache):
    def prog(n):
        return hlo.jit(f).lower(np.ones((n, 8), np.float32), W)
    prog(1).compile()
    (first,) = entries(cache)
    size = first.stat().st_size
    with config.override(cache_max_bytes=int(size * 2.6)):
        prog(2).compile()
        time.sleep(0.02)
        assert isinstance(prog(1).compile()._artifact, cc.CachedArtifact)  # refreshes entry 1
        time.sleep(0.02)
        prog(3).compile()  # past the bound: the least recently used (entry 2) goes
    names = [p.name for p in entries(cache)]
    assert len(names) == 2 and first.name in names
    assert isinstance(prog(3).compile()._artifact, cc.CachedArtifact)
    assert not isinstance(prog(2).compile()._artifact, cc.CachedArtifact)


def test_atomic_writes_from_many_threads(tmp_path):
    path = str(tmp_path / "v1" / "entry.hlox")
    contents = [bytes([i]) * (50_000 + i) for i in range(8)]
    errors = []

    def writer(data):
        try:
            for _ in range(10):
                hlox.atomic_write(path, data)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)
    ts = [threading.Thread(target=writer, args=(c,)) for c in contents]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors
    with open(path, "rb") as fh:
        assert fh.read() in contents
    assert os.listdir(tmp_path / "v1") == ["entry.hlox"]


SCRIPT = '''
import sys, numpy as np, hlo, hlo.numpy as hnp

@hlo.jit
def f(x, w):
    return hnp.tanh(x @ w) + 1.0

x = (np.arange(32, dtype=np.float32).reshape(4, 8) / 32.0)
w = np.linspace(-1, 1, 24, dtype=np.float32).reshape(8, 3)
state = hlo.explain_cache_miss(f, x, w).split(":")[0]
np.save(sys.argv[1], f(x, w))
print(state)
'''


def test_processes_share_the_cache(tmp_path):
    """Two processes compile the same program at once into an empty cache (both succeed, the
    entry is whole); a third one's first call is served from the cache, with the same result."""
    script = tmp_path / "prog.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, HLO_CACHE_DIR=str(tmp_path / "shared"))
    procs = [subprocess.Popen([sys.executable, str(script), str(tmp_path / f"out{i}.npy")],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for i in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (o, e) in zip(procs, outs):
        assert p.returncode == 0, e
        assert "Traceback" not in e and "corrupted" not in e
    assert len(entries(tmp_path / "shared")) == 1
    r = subprocess.run([sys.executable, str(script), str(tmp_path / "out2.npy")], capture_output=True,
                       text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "cache hit"
    ref = np.load(tmp_path / "out0.npy")
    np.testing.assert_array_equal(np.load(tmp_path / "out1.npy"), ref)
    np.testing.assert_array_equal(np.load(tmp_path / "out2.npy"), ref)
    info = json.loads(bytes(cc._read_entry(str(entries(tmp_path / "shared")[0]))[0]
                            .sections[cc.KEY_SECTION]).decode())
    assert set(info["parts"]) == set(cc.PART_ORDER)


def test_unwritable_cache_folder_warns_once_and_still_compiles(tmp_path, caplog):
    import logging
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache folder would be")
    with config.override(cache_dir=str(blocker / "cache")), \
            caplog.at_level(logging.WARNING, logger="hlo.cache"):
        for n in (1, 2):
            c = hlo.jit(f).lower(np.ones((n, 8), np.float32), W).compile()
            assert c(np.ones((n, 8), np.float32), W).shape == (n, 3)
    msgs = [r.getMessage() for r in caplog.records if "cannot write" in r.getMessage()]
    assert len(msgs) == 1


def test_the_cache_folder_is_private_and_a_folder_others_can_write_is_refused(tmp_path, caplog):
    import logging
    fresh = tmp_path / "fresh" / "cache"
    with config.override(cache_dir=str(fresh), cache=True):
        hlo.jit(f)(X, W)
    assert (fresh.stat().st_mode & 0o777) == 0o700 and ((fresh / cc.LAYOUT).stat().st_mode & 0o777) == 0o700
    shared = tmp_path / "shared"
    (shared / cc.LAYOUT).mkdir(parents=True)
    os.chmod(shared, 0o777)
    with config.override(cache_dir=str(shared), cache=True), \
            caplog.at_level(logging.WARNING, logger="hlo.cache"):
        for n in (1, 2):
            c = hlo.jit(f).lower(np.ones((n, 8), np.float32), W).compile()
            assert not c.from_cache and c(np.ones((n, 8), np.float32), W).shape == (n, 3)
    msgs = [r.getMessage() for r in caplog.records if "not using the compilation cache" in r.getMessage()]
    assert len(msgs) == 1 and "others can write to" in msgs[0]
    assert entries(shared) == []
