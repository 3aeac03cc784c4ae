"""Only regular files are read (issue 35): a FIFO or a device at a path given to ``hlo.load``,
``hlo inspect`` or at a compile-cache entry's name is refused (or, in the cache, replaced)
without blocking. Each check runs in a process of its own with a time limit: a regression
fails, it does not hang the suite."""
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")


def _run(code, *args, timeout=300):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *map(str, args)],
                          capture_output=True, text=True, timeout=timeout)


def test_load_and_inspect_refuse_a_fifo_and_a_device(tmp_path):
    fifo = tmp_path / "model.hlox"
    os.mkfifo(fifo)
    r = _run("""
        import sys, hlo
        for p in sys.argv[1:]:
            try:
                hlo.load(p)
            except hlo.LoadError as e:
                print(type(e).__name__, e)
    """, fifo, "/dev/null")
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"{fifo} is a FIFO, not an hlo executable" in r.stdout
    assert "/dev/null is a device, not an hlo executable" in r.stdout
    r = subprocess.run([sys.executable, "-m", "hlo", "inspect", str(fifo)], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines() == [f"hlo: error: {fifo} is a FIFO, not an hlo executable "
                                             "(only regular files are read)"]


def test_a_fifo_at_a_cache_entry_is_replaced_not_waited_on(tmp_path):
    r = _run("""
        import glob, os, sys, numpy as np, hlo, hlo.numpy as hnp
        from hlo import config
        config.update("cache_dir", sys.argv[1]); config.update("cache", True)
        f = lambda x: hnp.exp(x) - 1.0
        x = np.linspace(0, 1, 8, dtype=np.float32)
        hlo.jit(f).lower(x).compile()
        (entry,) = glob.glob(os.path.join(sys.argv[1], "**", "*.hlox"), recursive=True)
        os.unlink(entry)
        os.mkfifo(entry)
        c = hlo.jit(f).lower(x).compile()   # blocked forever before
        assert not c.from_cache
        np.testing.assert_allclose(c(x), np.exp(x) - 1, rtol=1e-6)
        assert os.path.isfile(entry)        # the compile stored a real entry in its place
        assert hlo.jit(f).lower(x).compile().from_cache
        print("ok")
    """, tmp_path / "cache")
    assert r.returncode == 0 and "ok" in r.stdout, (r.stdout + r.stderr)[-3000:]
