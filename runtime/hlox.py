"""The ``.hlox`` container: a saved executable as bytes, and the errors of reading one.

Layout (all integers little-endian; format version 1)::

    offset  size  field
    0       8     magic  b"\\x89HLOX\\r\\n\\x1a"  (PNG-style: catches text-mode and 7-bit damage)
    8       4     format version (u32)  -- fixed position in every version, read before anything else
    12      4     section count N (u32)
    16      40*N  section table: name (24 bytes ASCII, NUL-padded), offset (u64), length (u64)
    ...           section bytes, each starting at its offset (8-byte aligned, zero padding between)
    end-32  32    sha256 of every byte before it

Sections (version 1): ``manifest`` (UTF-8 JSON, always first), ``ir`` (the optimized IR text),
``code.<kind>`` (native code for a target kind: ``code.cpu`` is a relocatable object file for
the manifest's triple; a CUDA backend adds ``code.cuda``), optional others (``llvm``: the LLVM
IR, kept only when asked for). Unknown sections are ignored by readers, so adding one is not a
format change; changing the meaning of an existing one is, and bumps ``FORMAT_VERSION``.

Reading checks, in this order, before any byte of the payload is interpreted: the length, the
magic, the version (a newer one is refused by name), the sha256 over the whole file, the
section table's bounds, the manifest's JSON. Nothing here executes stored data: JSON and raw
bytes only, never pickle. This module imports only the standard library, so it is safe to use
(and its errors are safe to catch) without importing the tracer, the passes or a backend.
"""
from __future__ import annotations

import hashlib
import json
import os
import stat
import struct
import uuid
from dataclasses import dataclass, field
from typing import Dict, Optional

MAGIC = b"\x89HLOX\r\n\x1a"
FORMAT_VERSION = 1
SUFFIX = ".hlox"
_NAME_BYTES = 24
_ENTRY = struct.Struct(f"<{_NAME_BYTES}sQQ")
_HEAD = struct.Struct("<8sII")
_DIGEST = 32
_ALIGN = 8
MAX_MANIFEST_BYTES = 64 << 20


# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------

class ExecutableError(Exception):
    """Base class of everything that goes wrong saving, loading or calling a saved executable."""


class LoadError(ExecutableError, ValueError):
    """A saved executable cannot be loaded here (see the subclasses for why)."""


class CorruptFileError(LoadError):
    """Not an ``.hlox`` file, or one that was truncated or changed after it was written."""


class FormatVersionError(LoadError):
    """Written in a format version this hlo does not read (newer, or retired)."""


class TargetMismatchError(LoadError):
    """Compiled for another target kind, architecture, or a CPU with features this one lacks."""


class SaveError(ExecutableError, ValueError):
    """The executable cannot be saved (e.g. its arguments use a container that JSON cannot
    describe, or its target has no native code to store)."""


class InputMismatchError(ExecutableError, TypeError):
    """A loaded executable was called with arguments of another structure, shape or dtype."""


# --------------------------------------------------------------------------------------------
# Payload
# --------------------------------------------------------------------------------------------

@dataclass
class Payload:
    """What a ``.hlox`` file holds: the manifest (a JSON-able dict) and named byte sections."""
    manifest: dict
    sections: Dict[str, bytes] = field(default_factory=dict)

    @property
    def format_version(self) -> int:
        return int(self.manifest.get("format_version", FORMAT_VERSION))


def _check_name(name: str) -> bytes:
    b = name.encode("ascii", "strict") if name.isascii() else None
    if not b or len(b) > _NAME_BYTES or b"\x00" in b:
        raise SaveError(f"section name {name!r} must be 1-{_NAME_BYTES} ASCII characters")
    return b


def dumps(payload: Payload) -> bytes:
    """The container's bytes for ``payload`` (the manifest's ``format_version`` is set to
    ``FORMAT_VERSION``; the manifest must be JSON-serializable)."""
    manifest = dict(payload.manifest)
    manifest["format_version"] = FORMAT_VERSION
    try:
        mtext = json.dumps(manifest, sort_keys=True, indent=1, allow_nan=False).encode("utf-8")
    except (TypeError, ValueError) as e:
        raise SaveError(f"the manifest is not plain JSON: {e}") from None
    sections = [("manifest", mtext)]
    for name, data in payload.sections.items():
        if name == "manifest":
            raise SaveError("section name 'manifest' is reserved")
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise SaveError(f"section {name!r} must be bytes, got {type(data).__name__}")
        sections.append((name, bytes(data)))
    table = []
    pos = _HEAD.size + _ENTRY.size * len(sections)
    body = bytearray()
    for name, data in sections:
        pad = (-pos) % _ALIGN
        body += b"\x00" * pad
        pos += pad
        table.append(_ENTRY.pack(_check_name(name), pos, len(data)))
        body += data
        pos += len(data)
    out = bytearray(_HEAD.pack(MAGIC, FORMAT_VERSION, len(sections)))
    for t in table:
        out += t
    out += body
    out += hashlib.sha256(out).digest()
    return bytes(out)


def peek_version(data: bytes) -> int:
    """The format version field of a container (after checking its magic), without verifying
    the rest."""
    if len(data) < _HEAD.size:
        raise CorruptFileError(f"not an hlo executable: {len(data)} bytes is too short for the "
                               f"{_HEAD.size}-byte header (truncated?)")
    magic, version, _ = _HEAD.unpack_from(data, 0)
    if magic != MAGIC:
        raise CorruptFileError("not an hlo executable (.hlox): the file does not start with the "
                               "hlox magic bytes")
    return version


def loads(data: bytes, *, what: str = "the data") -> Payload:
    """Parse and verify container bytes. Raises ``CorruptFileError`` or ``FormatVersionError``
    (naming ``what``, e.g. the path) and nothing else for bad input."""
    data = bytes(data)
    try:
        version = peek_version(data)
    except CorruptFileError as e:
        raise CorruptFileError(f"{what}: {e}") from None
    if version > FORMAT_VERSION:
        raise FormatVersionError(
            f"{what} was written in executable format version {version}, by a newer hlo; this hlo "
            f"reads format versions 1 to {FORMAT_VERSION}. Load it with a newer hlo, or compile "
            "the program again with this one")
    if version < 1:
        raise FormatVersionError(f"{what}: executable format version {version} does not exist "
                                 f"(this hlo reads versions 1 to {FORMAT_VERSION})")
    if len(data) < _HEAD.size + _DIGEST:
        raise CorruptFileError(f"{what}: truncated ({len(data)} bytes, no room for the checksum)")
    body, digest = data[:-_DIGEST], data[-_DIGEST:]
    if hashlib.sha256(body).digest() != digest:
        raise CorruptFileError(
            f"{what}: checksum mismatch (sha256 of the contents differs from the one stored when it "
            "was written): the file was truncated or modified. Save or copy it again")
    _, _, count = _HEAD.unpack_from(body, 0)
    table_end = _HEAD.size + _ENTRY.size * count
    if count < 1 or table_end > len(body):
        raise CorruptFileError(f"{what}: malformed section table ({count} sections)")
    sections: Dict[str, bytes] = {}
    for i in range(count):
        raw, off, n = _ENTRY.unpack_from(body, _HEAD.size + _ENTRY.size * i)
        name = raw.rstrip(b"\x00")
        if not name or not name.isascii() or b"\x00" in name:
            raise CorruptFileError(f"{what}: malformed section name in entry {i}")
        if off < table_end or off + n > len(body):
            raise CorruptFileError(f"{what}: section {name.decode()!r} lies outside the file")
        sections[name.decode("ascii")] = body[off:off + n]
    mtext = sections.pop("manifest", None)
    if mtext is None:
        raise CorruptFileError(f"{what}: no manifest section")
    if len(mtext) > MAX_MANIFEST_BYTES:
        raise CorruptFileError(f"{what}: manifest of {len(mtext)} bytes is implausibly large")
    try:
        manifest = json.loads(mtext.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise CorruptFileError(f"{what}: the manifest is not valid JSON ({e})") from None
    if not isinstance(manifest, dict):
        raise CorruptFileError(f"{what}: the manifest is not a JSON object")
    if manifest.get("format_version") != version:
        raise CorruptFileError(f"{what}: the manifest's format_version "
                               f"{manifest.get('format_version')!r} disagrees with the header's {version}")
    return Payload(manifest, sections)


def write(path, payload: Payload) -> None:
    """Write ``payload`` to ``path`` atomically (a temporary file in the same folder, then a
    rename), so a reader never sees a half-written file."""
    atomic_write(os.fspath(path), dumps(payload))


def atomic_write(path: str, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path`` (unique per process and thread), then
    rename it over ``path``: readers see the old file or the new one, never a partial one."""
    folder = os.path.dirname(path) or "."
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, f".tmp-{os.getpid()}-{uuid.uuid4().hex}")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            try:
                os.unlink(tmp)
            except OSError:
                pass


_refused: set = set()


def refuses_folder(log, what: str, moved_by: str, *folders: str) -> bool:
    """Whether ``private_folder(*folders)`` refuses them as a home for ``what`` (native code
    this process would run), after a warning on ``log`` (once per innermost folder)."""
    why = private_folder(*folders)
    if why is None:
        return False
    if folders[-1] not in _refused:
        _refused.add(folders[-1])
        log.warning("not using %s: %s (its files are native code this process would run; %s)",
                    what, why, moved_by)
    return True


def private_folder(*folders: str) -> Optional[str]:
    """Create each of ``folders`` (outermost first) private to this user (mode 0700) where
    missing; the reason they cannot hold native code this process will run when one belongs to
    another user or others can write to it (anyone who can write a file there runs code in every
    process that reads it), else None. A folder that cannot be created is not refused here (the
    write that follows says why)."""
    for d in folders:
        try:
            os.makedirs(d, mode=0o700, exist_ok=True)
            st = os.stat(d)
        except OSError:
            return None
        if hasattr(os, "getuid") and st.st_uid != os.getuid():
            return f"{d} belongs to another user"
        if st.st_mode & 0o022:
            return f"others can write to {d} (mode {st.st_mode & 0o7777:o})"
    return None


def read(path) -> Payload:
    """Read and verify the container at ``path``."""
    path = os.fspath(path)
    try:
        # opened without blocking and checked before reading: a FIFO or a device at the path
        # (at a cache entry's name, or given to hlo inspect) would block or never end
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
        try:
            mode = os.fstat(fd).st_mode
        except OSError:
            os.close(fd)
            raise
        if not stat.S_ISREG(mode):
            os.close(fd)
            if stat.S_ISDIR(mode):
                raise IsADirectoryError(path)
            kind = ("a FIFO" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or
                    stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a file")
            raise LoadError(f"{path} is {kind}, not an hlo executable (only regular files are read)")
        with os.fdopen(fd, "rb") as f:
            head = f.read(_HEAD.size)
            try:
                peek_version(head)  # refuse a foreign file before reading all of it
            except CorruptFileError as e:
                raise CorruptFileError(f"{path}: {e}") from None
            data = head + f.read()
    except IsADirectoryError:
        raise LoadError(f"{path} is a directory, not an hlo executable") from None
    return loads(data, what=path)
