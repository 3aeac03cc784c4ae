"""The library folder (``hlo.runtime.cpu.code_library``): one folder per build, bounded to the
most recently used builds; objects checked before use; a folder others can write to refused."""
from __future__ import annotations

import logging
import os

import pytest

from hlo.runtime.cpu import code_library as lib


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setenv("HLO_LIBRARY_DIR", str(tmp_path / "lib"))
    monkeypatch.delenv("HLO_LIBRARY", raising=False)
    return tmp_path / "lib"


def test_a_new_build_keeps_the_most_recently_used_others(folder):
    folder.mkdir(mode=0o700)
    old = []
    for i in range(6):   # builds of other hlo versions or generator sources, oldest first
        d = folder / f"{i:016x}"
        d.mkdir()
        (d / "x.o").write_bytes(b"x")
        os.utime(d, (1000 + i, 1000 + i))
        old.append(d.name)
    lib.put("thing", b"data")
    kept = sorted(e.name for e in os.scandir(folder))
    assert kept == sorted(old[-(lib.KEEP_BUILDS - 1):] + [lib.build_id()[:16]])
    assert lib.get("thing") == b"data"


def test_objects_are_checked_before_use(folder):
    obj = b"\x7fELF" + bytes(200)
    lib.put("obj", obj)
    assert lib.get("obj") == obj
    assert lib.fetch("obj", "some_symbol", lambda: b"rebuilt")[0] == b"rebuilt"   # no such symbol in it
    assert lib.get("obj") == b"rebuilt"
    path = folder / lib.build_id()[:16] / "obj.o"
    path.write_bytes(path.read_bytes()[:-1])
    assert lib.get("obj") is None and not path.exists()   # its checksum failed: deleted
    with pytest.raises(ValueError, match="bad library object name"):
        lib.get("../escape")


def test_off_reads_and_writes_nothing(folder, monkeypatch):
    monkeypatch.setenv("HLO_LIBRARY", "0")
    lib.put("obj", b"data")
    assert lib.get("obj") is None and not folder.exists()


def test_a_folder_others_can_write_to_is_not_used(folder, caplog):
    folder.mkdir()
    os.chmod(folder, 0o777)
    with caplog.at_level(logging.WARNING, logger="hlo.library"):
        lib.put("obj", b"data")
        lib.put("obj2", b"data")
    assert lib.get("obj") is None
    assert sorted(os.listdir(folder)) == []
    msgs = [r.getMessage() for r in caplog.records if "not using the library folder" in r.getMessage()]
    assert len(msgs) == 1 and "others can write" in msgs[0]
