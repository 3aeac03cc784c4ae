"""Donation on target cuda (issue 35). Without a GPU: the compiled program's manifest (the
output written into the donated input has no trailing copy; ``aliases`` and ``inputs_written``
say so) and the runtime's manifest checks. With one (marker ``gpu``): a DeviceArray of hlo's
own memory that overlaps no other argument is used in place (the result is its buffer, the
argument is deleted); the same array passed twice, or a foreign array (torch), is copied on the
device first with a DonationWarning, and the answers equal the undonated ones."""
import warnings

import numpy as np
import pytest

import hlo
import hlo.numpy as hnp
from hlo.ir.errors import DonationWarning
from hlo.runtime.steps import Copy, walk_steps

N = 1000


def flip_add(a, b):
    return a + hnp.flip(b, 0)


def _program(monkeypatch, fn=flip_add, donate=0, n=2):
    monkeypatch.setenv("HLO_CUDA_ARCH", "sm_90")
    args = [np.arange(N, dtype=np.float32)] * n
    with hlo.config.override(cache=False):
        return hlo.jit(fn, donate_argnums=donate, target="cuda").lower(*args).compile()


def test_manifest_names_the_alias_and_drops_the_copy(monkeypatch):
    c = _program(monkeypatch)
    prog = c._artifact.executable
    assert prog.manifest["aliases"] == [[0, 0]] and prog.manifest["inputs_written"] == [0]
    assert not [s for s in walk_steps(prog.steps) if isinstance(s, Copy)]
    from hlo.runtime.cuda.executable import Manifest
    m = Manifest(dict(prog.manifest, target={**prog.manifest["target"], "name": "cuda"}))
    assert m.aliases == {0: 0} and m.written == (0,)


def test_manifest_alias_of_another_shape_same_size():
    from hlo.runtime.cuda.executable import Manifest
    from hlo.runtime.steps import BufRef, Launch, steps_to_json
    x = BufRef("input", 0, 0, 4 * N)
    steps = [Launch("k", [x, x], [False, True], (1, 1, 1), (1, 1, 1))]
    m = Manifest({"format": 1, "target": {"name": "cuda", "arch": "sm_90"}, "kernels": ["k"],
                  "inputs": [{"dtype": "f32", "shape": [N]}], "outputs": [{"dtype": "s32", "shape": [4, N // 4]}],
                  "arena_size": 0, "steps": steps_to_json(steps), "aliases": [[0, 0]]})
    assert m.aliases == {0: 0} and m.written == (0,)
    with pytest.raises(ValueError, match="differ in size"):
        Manifest({"format": 1, "target": {"name": "cuda", "arch": "sm_90"}, "kernels": ["k"],
                  "inputs": [{"dtype": "f32", "shape": [N]}], "outputs": [{"dtype": "f32", "shape": [N + 1]}],
                  "arena_size": 0, "steps": steps_to_json(steps), "aliases": [[0, 0]]})


# -- on a GPU ------------------------------------------------------------------------------------

@pytest.mark.gpu
def test_device_array_donation_on_the_gpu():
    f = hlo.jit(flip_add, donate_argnums=0, target="cuda")
    y = hlo.device_put(np.ones(N, np.float32))
    for _ in range(3):  # the first call, then the fast path
        x = hlo.device_put(np.arange(N, dtype=np.float32))
        ptr = x.device_ptr
        with warnings.catch_warnings():
            warnings.simplefilter("error", DonationWarning)
            r = f(x, y)
        np.testing.assert_array_equal(np.asarray(r), np.arange(N) + 1)
        assert r.device_ptr == ptr and x.is_deleted()
    for _ in range(3):  # the same array twice: copied, not deleted, the right answer
        x = hlo.device_put(np.arange(N, dtype=np.float32))
        with pytest.warns(DonationWarning, match=r"donated argument a .*shares memory with argument b"):
            r = f(x, x)
        np.testing.assert_array_equal(np.asarray(r), np.full(N, N - 1, np.float32))
        assert not x.is_deleted() and r.device_ptr != x.device_ptr
        np.testing.assert_array_equal(np.asarray(x), np.arange(N, dtype=np.float32))
    stats = f.lower(x, y).compile().donation_stats()
    assert set(stats) >= {"used", "declined", "aliased_bytes"}


@pytest.mark.gpu
def test_donated_numpy_and_torch_arguments_on_the_gpu(tmp_path):
    f = hlo.jit(flip_add, donate_argnums=0, target="cuda")
    x = np.arange(N, dtype=np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DonationWarning)
        r = f(x, x)  # numpy: uploaded to private copies, nothing to decline
    np.testing.assert_array_equal(np.asarray(r), np.full(N, N - 1, np.float32))
    np.testing.assert_array_equal(x, np.arange(N, dtype=np.float32))
    path = tmp_path / "f.hlox"
    f.lower(x, x).compile().save(path)
    g = hlo.load(path)
    d = hlo.device_put(x)
    with pytest.warns(DonationWarning, match="shares memory"):
        r = g(d, d)
    np.testing.assert_array_equal(np.asarray(r), np.full(N, N - 1, np.float32))
    torch = pytest.importorskip("torch")
    t = torch.arange(N, dtype=torch.float32, device="cuda")
    with pytest.warns(DonationWarning, match="another library"):
        r = f(t, hlo.device_put(np.zeros(N, np.float32)))
    np.testing.assert_array_equal(np.asarray(r), np.arange(N, dtype=np.float32))
    assert r.device_ptr != t.data_ptr()
    torch.testing.assert_close(t, torch.arange(N, dtype=torch.float32, device="cuda"))
