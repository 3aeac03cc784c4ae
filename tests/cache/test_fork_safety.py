"""Forking while another thread compiles (issue 35): the child compiles and loads from the
persistent cache instead of hanging on a lock a thread it does not have held at the fork
(``hlo/base/fork_safety.py``: llvmlite's lock; each module's own locks).

The probe's pattern, in a fresh process so that the forks copy no pytest state: a thread
compiles new programs in a loop, the main thread forks repeatedly, each child compiles a new
program and loads one from the cache, and exits with a status that says what it saw. A child
that does not exit in time is killed and the test fails (it never hangs)."""
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")

PROBE = textwrap.dedent(r"""
    import os, sys, threading, time
    import numpy as np
    import hlo, hlo.numpy as hnp
    from hlo import config
    config.update("cache_dir", sys.argv[1]); config.update("cache", True)
    FORKS, CHILD_SECONDS = int(sys.argv[2]), float(sys.argv[3])

    def cached(x):
        return hnp.cos(x) * 3.0 - x
    X = np.linspace(-1, 1, 16, dtype=np.float32)
    want = np.cos(X) * np.float32(3) - X
    first = hlo.jit(cached).lower(X).compile()
    assert not first.from_cache

    stop = threading.Event()
    compiles = [0]
    def loop():
        i = 0
        while not stop.is_set():
            i += 1
            g = hlo.jit(lambda x, i=i: hnp.sin(x) * float(i) + hnp.exp(x))
            g(np.ones(3 + i % 11, np.float32))   # a new program each time: compiled, stored
            compiles[0] += 1
    t = threading.Thread(target=loop, daemon=True)
    t.start()
    while compiles[0] < 1:
        time.sleep(0.01)

    codes = []
    for k in range(FORKS):
        time.sleep(0.03 * (k % 4))  # fork at different moments of the compiles
        pid = os.fork()
        if pid == 0:
            try:
                hit = hlo.jit(cached).lower(X).compile()
                if not hit.from_cache:
                    os._exit(4)
                if not np.allclose(hit(X), want, rtol=1e-5):
                    os._exit(5)
                fresh = hlo.jit(lambda x: x * 2.0 + float(k))   # compiled in the child
                if not np.array_equal(fresh(X), X * np.float32(2) + np.float32(k)):
                    os._exit(6)
                os._exit(0)
            except BaseException:
                import traceback; traceback.print_exc()
                os._exit(3)
        deadline = time.monotonic() + CHILD_SECONDS
        while True:
            p, status = os.waitpid(pid, os.WNOHANG)
            if p:
                codes.append(os.waitstatus_to_exitcode(status))
                break
            if time.monotonic() > deadline:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
                codes.append("hung")
                break
            time.sleep(0.01)
    stop.set()
    t.join()
    print("codes", codes, "parent compiles", compiles[0])
    sys.exit(0 if all(c == 0 for c in codes) else 1)
""")


def test_children_forked_while_a_thread_compiles_compile_and_load(tmp_path):
    # 12 forks; a child needs well under a second on an idle machine (a hung one, forever):
    # 60 s each leaves room for a busy CI machine and still bounds the test.
    r = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path / "cache"), "12", "60"],
                       capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    assert "codes [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]" in r.stdout


def test_fork_handlers_leave_llvmlite_usable_in_the_parent():
    # the handler takes llvmlite's lock before a fork: released after it in the parent (another
    # thread can take it), fresh in the child
    code = textwrap.dedent("""
        import os, threading, numpy as np, hlo
        import llvmlite.binding.ffi as ffi
        def free_elsewhere():
            got = []
            def probe():
                ok = ffi.lib._lock._lock.acquire(blocking=False)
                got.append(ok)
                if ok:
                    ffi.lib._lock._lock.release()
            t = threading.Thread(target=probe); t.start(); t.join()
            return got[0]
        f = hlo.jit(lambda x: x + 1)
        f(np.ones(2, np.float32))
        pid = os.fork()
        if pid == 0:
            os._exit(0 if free_elsewhere() else 1)
        _, st = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(st) == 0
        assert free_elsewhere()
        g = hlo.jit(lambda x: x * 3)
        assert (g(np.ones(2, np.float32)) == 3).all()
        print("ok")
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-2000:]
