"""``Compiled.as_text("sass")`` (no GPU needed): the program's cubin goes to the CUDA toolkit's
disassembler (nvdisasm, else cuobjdump) and its listing comes back; without either tool, or
without a cubin and ptxas, the error says what is missing. The real disassembly is checked
where the toolkit has a disassembler (skipped here otherwise)."""
import os
import stat
import sys

import numpy as np
import pytest

import hlo
import hlo.numpy as hnp
from hlo.backends.cuda import sass as sass_mod
from hlo.backends.nvptx import find_ptxas

X = np.ones((4, 8), np.float32)


@pytest.fixture(scope="module")
def compiled():
    return hlo.jit(lambda x: hnp.tanh(x) * 2.0).lower(X).compile(target="cuda")


@pytest.fixture
def no_toolkit(monkeypatch, tmp_path):
    """PATH and the toolkit roots hold no disassembler."""
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    for r in sass_mod.ROOTS:
        monkeypatch.delenv(r, raising=False)
    monkeypatch.setattr(sass_mod, "DEFAULT_ROOT", str(tmp_path / "no-cuda"))
    return empty


def _stand_in(folder, name):
    """A stand-in for ``name`` (a Python script: PATH is empty) that reports its flags and
    the first bytes of the file it was given."""
    p = folder / name
    p.write_text(f"#!{sys.executable}\n"
                 "import sys\n"
                 "flags = [a for a in sys.argv[1:] if a.startswith('-')]\n"
                 "print('args:', *flags)\n"
                 "print('magic:', open(sys.argv[-1], 'rb').read(4))\n")
    p.chmod(p.stat().st_mode | stat.S_IXUSR)


def test_without_a_disassembler_the_error_says_what_to_install(compiled, no_toolkit):
    with pytest.raises(FileNotFoundError, match=r"nvdisasm or cuobjdump .*as_text\('ptx'\)"):
        compiled.as_text("sass")


@pytest.mark.skipif(find_ptxas() is None, reason="no ptxas here: the program carries no cubin")
@pytest.mark.parametrize("tool,flag", [("nvdisasm", "-c"), ("cuobjdump", "-sass")])
def test_the_cubin_goes_to_the_disassembler_and_its_listing_comes_back(compiled, no_toolkit, tool, flag):
    _stand_in(no_toolkit, tool)
    text = compiled.as_text("sass")
    arch = compiled._artifact.executable.arch
    assert text.startswith(f"// SASS for {arch} ({tool})\n"), text
    assert f"args: {flag}\n" in text and "magic: b'\\x7fELF'" in text, text


def test_a_program_without_a_cubin_needs_ptxas(compiled, no_toolkit, monkeypatch):
    _stand_in(no_toolkit, "nvdisasm")
    exe = compiled._artifact.executable
    bare = type("P", (), {"ptx": exe.ptx, "cubins": {}, "arch": exe.arch, "kernels": exe.kernels})()
    monkeypatch.setattr(sass_mod.nvptx, "find_ptxas", lambda: None)
    with pytest.raises(FileNotFoundError, match="has no cubin .* ptxas is not here"):
        sass_mod.sass(bare)


@pytest.mark.skipif(sass_mod.find_disassembler() is None or find_ptxas() is None,
                    reason="the CUDA toolkit here has no nvdisasm / cuobjdump (or no ptxas)")
def test_real_sass_lists_the_kernels(compiled):
    text = compiled.as_text("sass")
    for k in compiled._artifact.executable.kernels:
        assert k in text
    assert any(op in text for op in ("MUFU", "FMUL", "EXIT")), text[:2000]


def test_other_targets_refuse_sass():
    c = hlo.jit(lambda x: x + 1.0).lower(X).compile(target="cpu")
    with pytest.raises(ValueError, match=r"as_text\('sass'\) is for target 'cuda'.*'llvm' and 'asm'"):
        c.as_text("sass")
    assert os.path.basename(sass_mod.__file__) == "sass.py"
