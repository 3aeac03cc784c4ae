"""The .hlox container (hlo.runtime.hlox): layout, integrity checks and refusals, without
compiling anything."""
from __future__ import annotations

import hashlib
import json
import struct

import pytest

from hlo.runtime import hlox


def _payload():
    return hlox.Payload({"hello": [1, 2, {"x": None}]}, {"code.cpu": bytes(range(256)) * 3, "ir": b"module @m\n"})


def _rehash(data: bytes) -> bytes:
    body = data[:-32]
    return body + hashlib.sha256(body).digest()


def test_round_trip_and_layout(tmp_path):
    p = _payload()
    data = hlox.dumps(p)
    assert data[:8] == hlox.MAGIC
    assert struct.unpack_from("<I", data, 8)[0] == hlox.FORMAT_VERSION == 1
    assert hashlib.sha256(data[:-32]).digest() == data[-32:]
    back = hlox.loads(data)
    assert back.manifest == {**p.manifest, "format_version": 1}
    assert back.sections == p.sections
    path = tmp_path / "x.hlox"
    hlox.write(path, p)
    assert path.read_bytes() == data          # deterministic bytes
    assert hlox.read(path).sections["code.cpu"] == p.sections["code.cpu"]
    assert [f.name for f in tmp_path.iterdir()] == ["x.hlox"]   # no temporary file left behind


def test_sections_are_aligned_and_the_manifest_is_plain_json():
    data = hlox.dumps(_payload())
    count = struct.unpack_from("<I", data, 12)[0]
    assert count == 3
    for i in range(count):
        name, off, n = struct.unpack_from("<24sQQ", data, 16 + 40 * i)
        assert off % 8 == 0 and off + n <= len(data) - 32
        if name.rstrip(b"\0") == b"manifest":
            assert json.loads(data[off:off + n])["hello"] == [1, 2, {"x": None}]


def test_unknown_sections_are_kept_for_newer_readers():
    p = _payload()
    p.sections["future.extra"] = b"\x01\x02"
    assert hlox.loads(hlox.dumps(p)).sections["future.extra"] == b"\x01\x02"


@pytest.mark.parametrize("cut", [0, 5, 8, 15, 16, 40, -33, -1])
def test_truncated_files_are_refused(cut):
    data = hlox.dumps(_payload())
    with pytest.raises(hlox.CorruptFileError, match="truncated|checksum|too short"):
        hlox.loads(data[:cut], what="f.hlox")


def test_not_an_executable():
    with pytest.raises(hlox.CorruptFileError, match="does not start with the hlox magic"):
        hlox.loads(b"PK\x03\x04" + b"\0" * 100, what="model.zip")


def test_bit_flip_is_a_checksum_mismatch():
    data = bytearray(hlox.dumps(_payload()))
    data[200] ^= 0x10
    with pytest.raises(hlox.CorruptFileError, match="checksum mismatch"):
        hlox.loads(bytes(data), what="f.hlox")


def test_newer_format_version_is_refused_by_name():
    data = bytearray(hlox.dumps(_payload()))
    struct.pack_into("<I", data, 8, 7)
    with pytest.raises(hlox.FormatVersionError, match="format version 7, by a newer hlo"):
        hlox.loads(_rehash(bytes(data)), what="new.hlox")
    # refused before the checksum is even looked at: a newer format may checksum differently
    with pytest.raises(hlox.FormatVersionError):
        hlox.loads(bytes(data))
    struct.pack_into("<I", data, 8, 0)
    with pytest.raises(hlox.FormatVersionError, match="version 0 does not exist"):
        hlox.loads(_rehash(bytes(data)))


def test_malformed_contents_with_a_valid_checksum_are_refused():
    data = bytearray(hlox.dumps(_payload()))
    bad = bytearray(data)
    struct.pack_into("<Q", bad, 16 + 24, len(data) * 2)        # manifest offset past the end
    with pytest.raises(hlox.CorruptFileError, match="outside the file"):
        hlox.loads(_rehash(bytes(bad)))
    bad = bytearray(data)
    struct.pack_into("<I", bad, 12, 10 ** 6)                    # section count past the end
    with pytest.raises(hlox.CorruptFileError, match="section table"):
        hlox.loads(_rehash(bytes(bad)))
    bad = bytearray(data)
    _, off, n = struct.unpack_from("<24sQQ", bad, 16)
    bad[off] = ord("[")                                        # manifest no longer JSON
    with pytest.raises(hlox.CorruptFileError, match="not valid JSON"):
        hlox.loads(_rehash(bytes(bad)))
    p = hlox.dumps(hlox.Payload({"format_version": 1}, {}))
    body = p[:-32].replace(b'"format_version": 1', b'"format_version": 2')
    with pytest.raises(hlox.CorruptFileError, match="disagrees"):
        hlox.loads(body + hashlib.sha256(body).digest())


def test_save_errors():
    with pytest.raises(hlox.SaveError, match="not plain JSON"):
        hlox.dumps(hlox.Payload({"x": object()}))
    with pytest.raises(hlox.SaveError, match="not plain JSON"):
        hlox.dumps(hlox.Payload({"x": float("nan")}))
    with pytest.raises(hlox.SaveError, match="reserved"):
        hlox.dumps(hlox.Payload({}, {"manifest": b""}))
    with pytest.raises(hlox.SaveError, match="1-24 ASCII"):
        hlox.dumps(hlox.Payload({}, {"x" * 25: b""}))
    with pytest.raises(hlox.SaveError, match="must be bytes"):
        hlox.dumps(hlox.Payload({}, {"code.cpu": "text"}))


def test_errors_form_one_family():
    for cls in (hlox.CorruptFileError, hlox.FormatVersionError, hlox.TargetMismatchError):
        assert issubclass(cls, hlox.LoadError) and issubclass(cls, ValueError)
    for cls in (hlox.LoadError, hlox.SaveError, hlox.InputMismatchError):
        assert issubclass(cls, hlox.ExecutableError)
    assert issubclass(hlox.InputMismatchError, TypeError)


def test_the_container_module_imports_only_the_standard_library():
    import ast
    import inspect
    tree = ast.parse(inspect.getsource(hlox))
    mods = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    mods |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert mods <= {"__future__", "hashlib", "json", "os", "stat", "struct", "uuid", "dataclasses",
                    "typing"}, mods


def test_read_refuses_foreign_and_short_files(tmp_path):
    (tmp_path / "a.hlox").write_bytes(b"\x7fELF" + b"\0" * 4096)
    with pytest.raises(hlox.CorruptFileError, match=r"a\.hlox: not an hlo executable"):
        hlox.read(tmp_path / "a.hlox")
    (tmp_path / "b.hlox").write_bytes(hlox.MAGIC[:5])
    with pytest.raises(hlox.CorruptFileError, match=r"b\.hlox: .*too short"):
        hlox.read(tmp_path / "b.hlox")
