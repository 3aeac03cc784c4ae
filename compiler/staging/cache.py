"""The persistent compilation cache: compiled executables kept on disk across processes.

``targets.compile_module`` asks ``begin(module, target, options, dump_dir)`` before it compiles.
On a hit it gets back an ``Artifact`` read from disk (no passes, no LLVM); on a miss it compiles
and hands the result to ``Pending.store``. Everything that could make a cached executable wrong
is in the key, as named parts (``explain_cache_miss`` and the recompile log name the part that
differs from the closest existing entry):

- ``program``: sha256 of the traced module's text *without source locations*. Moving a function
  down a file, or running it from another folder, does not recompile. The optimized IR stored in
  an entry does carry the locations of the process that compiled it; a hit maps them onto the
  current ones (the traced texts are identical but for their ``loc(...)`` tokens, so token i of
  the stored text corresponds to token i of the current one). When that correspondence is not a
  function (two ops that shared a line now sit on different lines), the entry is not used: the
  program is compiled again and the entry replaced, so ``as_text()`` never shows stale lines.
- ``hlo version``: ``hlo.__version__`` plus a digest of hlo's own Python sources (path, size
  and modification time of each file: a stat, not a read), so a changed compiler never reuses
  code compiled by an older one (this matters in a development tree, where the version number
  does not move; touching a file costs one recompile per program).
- ``target`` and ``cpu``: the target name; the machine (``Target.key_parts``, runtime/target.py:
  the host triple, CPU name and LLVM feature string; a GPU's triple, architecture and PTX).
- ``options``: the compile options, donated arguments included.
- ``environment``: what else changes the generated code (the target's too): the thread count
  the code is built for, the BLAS found, and every ``HLO_CPU_*`` variable (``HLO_CPU_GEMM``,
  ``HLO_CPU_THREADS``).

Entries are ``.hlox`` containers (``hlo.aot``'s format, ``runtime/hlox.py``) with one extra
section, ``cache.key`` (JSON: the key parts, the traced text with its locations, and the
warnings the compile issued, which a hit issues again), named
``<program digest 16>-<key digest>.hlox`` in ``<cache dir>/v1/``. Writes go to a temporary
file in the same folder and are renamed into place, so concurrent processes never see half an
entry (two processes compiling the same program both write a complete file; the last rename
wins). An entry that does not read back (truncated, modified, unreadable) is logged (logger
``hlo.cache``, WARNING), deleted and compiled again: never a crash.

Size bound: ``cache_max_bytes`` (``HLO_CACHE_MAX_BYTES``, default 1 GiB). A hit refreshes its
entry's modification time; when a write takes the cache past the bound, the entries least
recently used (oldest modification time) are deleted until it is under 90% of it.

Not cached: the interpreter target (nothing native to keep), compiles with a dump directory
(``dump_dir=`` or ``HLO_DUMP_DIR``: the user wants the pass dumps, which only a compile writes),
and everything when the cache is off (``HLO_CACHE=0`` or ``hlo.config.update("cache", False)``).

Trust: an entry is native code that a hit runs in the process, like a pickle. The cache folder
and its ``v1/`` are created private to the user (mode 0700); a cache folder that belongs to
another user or that others can write to is not used (a warning says why, once).
"""
from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import re
import shutil
import threading
import time
from typing import Dict, List, Optional, Sequence, Tuple

from hlo.ir.callbacks import has_host_callbacks
from hlo.ir.targets import info
from hlo.runtime.hlox import refuses_folder

from .targets import Artifact

log = logging.getLogger("hlo.cache")

LAYOUT = "v1"                     # the folder under the cache dir; bumped if the naming changes
KEY_SECTION = "cache.key"
SUFFIX = ".hlox"
DEFAULT_MAX_BYTES = 1 << 30
PART_ORDER = ("program", "hlo version", "target", "cpu", "options", "environment")
_LOC = re.compile(r'loc\("(?:[^"\\]|\\.)*":\d+\)')
_STALE_TMP_SECONDS = 3600.0

# ----------------------------------------------------------------------------------------------
# Settings
# ----------------------------------------------------------------------------------------------


def enabled() -> bool:
    """Is the persistent cache on (``hlo.config`` ``cache``, else ``HLO_CACHE``, default on)?"""
    from .. import config
    v = config.read("cache")
    if v is not None:
        return bool(v)
    return os.environ.get("HLO_CACHE", "1").strip().lower() not in ("0", "false", "off", "no", "")


def cache_dir() -> str:
    """The cache's root folder (``hlo.config`` ``cache_dir``, ``HLO_CACHE_DIR``,
    ``$XDG_CACHE_HOME/hlo``, ``~/.cache/hlo``)."""
    from .. import config
    v = config.read("cache_dir")
    if v is None:
        v = os.environ.get("HLO_CACHE_DIR")
    if not v:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        v = os.path.join(base, "hlo")
    return os.fspath(v)


def entries_dir() -> str:
    return os.path.join(cache_dir(), LAYOUT)


def max_bytes() -> int:
    from .. import config
    v = config.read("cache_max_bytes")
    if v is not None:
        return int(v)
    env = os.environ.get("HLO_CACHE_MAX_BYTES")
    if env:
        try:
            n = int(env)
            if n > 0:
                return n
        except ValueError:
            pass
        log.warning("HLO_CACHE_MAX_BYTES=%r is not a positive integer; using %d", env, DEFAULT_MAX_BYTES)
    return DEFAULT_MAX_BYTES


def bypass_reason(target: str, dump_dir: Optional[str], module=None) -> Optional[str]:
    """Why this compile does not use the cache, or None if it does."""
    if module is not None and has_host_callbacks(module):
        # An entry would name callables by this process's registry ids (hlo.ir.callbacks),
        # which mean other functions in another process: such programs are never stored.
        return "the program calls back into Python (hlo.debug.print, hlo.pure_callback)"
    if not enabled():
        return "the persistent cache is off (HLO_CACHE=0 or hlo.config 'cache' is False)"
    if not info(target).compiled:
        return "the interpreter target is not cached (there is no native code to keep)"
    if dump_dir is not None or os.environ.get("HLO_DUMP_DIR"):
        return "a dump directory was requested (only a real compile writes the pass dumps)"
    return None


# ----------------------------------------------------------------------------------------------
# The key
# ----------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def source_digest() -> str:
    """A digest of hlo's own Python sources: relative path, size and modification time of every
    .py file (stat only, no reading: ~1 ms). Any edit changes it, and so does touching a file or
    a fresh checkout (a harmless miss)."""
    import importlib.util

    import hlo
    h = hashlib.sha256()
    roots = [os.path.dirname(os.path.abspath(hlo.__file__))]
    for sub in ("ir", "passes", "backends", "runtime"):
        try:
            spec = importlib.util.find_spec(f"hlo.{sub}")
        except (ImportError, ValueError):
            spec = None
        if spec is not None and spec.submodule_search_locations:
            roots.extend(os.path.abspath(p) for p in spec.submodule_search_locations)
    for root in dict.fromkeys(roots):
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__"
                                 and os.path.join(dirpath, d) not in roots)
            for name in sorted(filenames):
                if name.endswith(".py"):
                    path = os.path.join(dirpath, name)
                    try:
                        st = os.stat(path)
                    except OSError:
                        continue
                    rel = os.path.relpath(path, os.path.dirname(root))
                    h.update(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    return h.hexdigest()[:16]


def _version_part() -> str:
    import hlo
    return f"{hlo.__version__} (sources {source_digest()})"


def _target_parts(target: str) -> Dict[str, str]:
    """The target's own key parts (``Target.key_parts``: ``cpu``, ``environment``)."""
    from hlo.runtime.target import KINDS, current
    if target not in KINDS:
        return {"cpu": "-", "environment": "-"}
    if target == "cuda":  # the GPU the backend compiles for (sm_90 on a machine without one)
        from hlo.backends.cuda.device import launch_device
        return launch_device().target.key_parts()
    return current(target).key_parts()


def _jsonable(x):
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in sorted(x.items(), key=lambda kv: str(kv[0]))}
    if isinstance(x, (list, tuple, set, frozenset)):
        items = [_jsonable(v) for v in x]
        return sorted(items, key=repr) if isinstance(x, (set, frozenset)) else items
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    return repr(x)


def _options_part(options: Optional[dict]) -> str:
    return json.dumps(_jsonable(dict(options or {})), sort_keys=True)


class Key:
    """The named parts of a cache key, their digest and the traced text (with locations)."""

    def __init__(self, parts: Dict[str, str], traced_text: str):
        self.parts = parts
        self.traced_text = traced_text
        self.digest = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()

    @property
    def filename(self) -> str:
        return f"{self.parts['program'][:16]}-{self.digest}{SUFFIX}"

    def to_json(self) -> dict:
        return {"parts": self.parts, "traced_text": self.traced_text, "digest": self.digest}


def strip_locations(text: str) -> str:
    return _LOC.sub("loc(?)", text)


def make_key(module, target: str, options: Optional[dict]) -> Key:
    from hlo.ir import print_module
    text = print_module(module)
    parts = {
        "program": hashlib.sha256(strip_locations(text).encode()).hexdigest(),
        "hlo version": _version_part(),
        "target": target,
        **_target_parts(target),
        "options": _options_part(options),
    }
    return Key(parts, text)


def location_map(stored_text: str, current_text: str) -> Optional[Dict[str, str]]:
    """Map each ``loc(...)`` token of ``stored_text`` to the token at the same position of
    ``current_text`` (texts equal but for their locations). None if a stored token would map to
    two different current ones."""
    old, new = _LOC.findall(stored_text), _LOC.findall(current_text)
    if len(old) != len(new):
        return None
    out: Dict[str, str] = {}
    for a, b in zip(old, new):
        if out.setdefault(a, b) != b:
            return None
    return out


def relocate(text: str, mapping: Dict[str, str]) -> str:
    if all(a == b for a, b in mapping.items()):
        return text
    return _LOC.sub(lambda m: mapping.get(m.group(0), m.group(0)), text)


def _plain(token: str) -> str:
    """``loc("f.py":3)`` as ``Location.__str__`` writes it: ``f.py:3``."""
    body, line = token[4:-1].rsplit(":", 1)
    name = re.sub(r'\\(.)', lambda e: "\n" if e.group(1) == "n" else e.group(1), body[1:-1])
    return f"{name}:{line}" if line != "0" else name


def plain_mapping(mapping: Dict[str, str]) -> Dict[str, str]:
    """The location map in the ``file:line`` form that decisions, the buffer plan and profile
    records use."""
    return {_plain(a): _plain(b) for a, b in mapping.items() if a != b}


def relocate_labels(text: str, plain: Dict[str, str]) -> str:
    """``(file:line)`` in a buffer plan's value labels, moved as ``relocate`` moves ``loc``."""
    if not plain:
        return text
    return re.sub(r"\(([^()\n]+:\d+)\)", lambda m: f"({plain.get(m.group(1), m.group(1))})", text)


# ----------------------------------------------------------------------------------------------
# Entries on disk
# ----------------------------------------------------------------------------------------------


def _read_entry(path: str):
    """(payload, key json) of the entry at ``path``; raises on anything unreadable."""
    from hlo.runtime import hlox
    payload = hlox.read(path)
    raw = payload.sections.get(KEY_SECTION)
    if raw is None:
        raise hlox.CorruptFileError(f"{path}: no {KEY_SECTION} section")
    info = json.loads(bytes(raw).decode("utf-8"))
    if not isinstance(info, dict) or not isinstance(info.get("parts"), dict):
        raise hlox.CorruptFileError(f"{path}: malformed {KEY_SECTION} section")
    return payload, info


def _discard(path: str, error: BaseException) -> None:
    from hlo.runtime import hlox
    corrupt = isinstance(error, hlox.CorruptFileError) or not isinstance(error, hlox.LoadError)
    what = "corrupted cache entry" if corrupt else "cache entry that does not load here"
    log.warning("hlo.cache: ignoring %s %s (%s: %s); it will be replaced", what, path,
                type(error).__name__, error)
    try:
        os.unlink(path)
    except OSError:
        pass


_size_lock = threading.Lock()
_known_size: Dict[str, int] = {}   # entries folder -> bytes believed to be in it


def _after_fork_in_child() -> None:
    """A thread of the parent may have held the lock at the fork (base/fork_safety.py)."""
    global _size_lock
    _size_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _scan(folder: str) -> List[Tuple[float, int, str]]:
    """(mtime, size, path) of every entry; stale temporary files are removed on the way."""
    out = []
    now = time.time()
    try:
        it = os.scandir(folder)
    except OSError:
        return out
    with it:
        for e in it:
            try:
                st = e.stat()
            except OSError:
                continue
            if e.name.startswith(".tmp-"):
                if now - st.st_mtime > _STALE_TMP_SECONDS:
                    try:
                        os.unlink(e.path)
                    except OSError:
                        pass
                continue
            if e.name.endswith(SUFFIX):
                out.append((st.st_mtime, st.st_size, e.path))
    return out


def _account(folder: str, added: int) -> None:
    """Add ``added`` bytes to the folder's size; evict least recently used entries past the
    bound. The folder is scanned on the first write of a process and whenever the running
    total passes the bound (other processes write too), not on every write."""
    bound = max_bytes()
    with _size_lock:
        total = _known_size.get(folder)
        if total is None:
            total = sum(s for _, s, _ in _scan(folder))
        else:
            total += added
        if total > bound:
            entries = sorted(_scan(folder))
            total = sum(s for _, s, _ in entries)
            target = int(bound * 0.9)
            for mtime, size, path in entries:
                if total <= target:
                    break
                try:
                    os.unlink(path)
                    log.info("hlo.cache: evicted %s (%d bytes, least recently used)", path, size)
                except OSError:
                    pass
                total -= size
        _known_size[folder] = total


def clear() -> None:
    """Delete every entry of the cache (the library code, ``hlo.runtime.cpu.code_library``, is
    not in it)."""
    folder = entries_dir()
    # library code that hlo versions before the library folder kept here
    shutil.rmtree(os.path.join(folder, "objects"), ignore_errors=True)
    for _, _, path in _scan(folder):
        try:
            os.unlink(path)
        except OSError:
            pass
    with _size_lock:
        _known_size.pop(folder, None)


# ----------------------------------------------------------------------------------------------
# Entries: hlo.aot's container plus the key section; a hit becomes an Artifact
# ----------------------------------------------------------------------------------------------

def _entry_bytes(artifact, module, key: Key) -> bytes:
    """The ``.hlox`` bytes of a fresh artifact (``saved_executable.to_payload``), with the key
    section."""
    from hlo.runtime import hlox

    from .saved import to_payload
    from .stages import Compiled, Lowered
    payload = to_payload(Compiled(Lowered(module), artifact))
    info = key.to_json()
    buffers = getattr(artifact.optimize_result, "buffers", None)
    info["warnings"] = [n for n in getattr(buffers, "donation_notes", ()) if " is not reused: " in n]
    payload.sections[KEY_SECTION] = json.dumps(info).encode("utf-8")
    return hlox.dumps(payload)


def _entry_artifact(payload, target: str, mapping: Dict[str, str], path: str):
    """The ``Artifact`` of a cache entry (raises if the entry does not load)."""
    from .saved import LoadedExecutable
    loaded = LoadedExecutable(payload, path)
    plan = "\n".join((payload.manifest.get("buffer_plan") or {}).get("text") or [])
    plain = plain_mapping(mapping)
    prof = (getattr(loaded.executable, "manifest", None) or {}).get("profile")
    if isinstance(prof, dict) and plain:  # its records name the user's lines too (this load's copy)
        for r in list(prof.get("steps") or ()) + list((prof.get("kernels") or {}).values()):
            if isinstance(r, dict) and r.get("loc") in plain:
                r["loc"] = plain[r["loc"]]
    return CachedArtifact(target, loaded, relocate(loaded.as_text(), mapping),
                          relocate_labels(plan, plain))


class _StoredPlan:
    """The buffer plan's text as stored in an entry (what ``hlo.aot`` saves of it)."""

    def __init__(self, text: str):
        self._text = text

    def text(self) -> str:
        return self._text


class _StoredResult:
    """What a cache hit keeps of the pipeline's result: the optimized module (parsed from the
    stored text when first asked for) and the buffer plan's text. Not an ``Optimized``: passes
    did not run in this process."""

    from_cache = True

    def __init__(self, artifact: "CachedArtifact", plan_text: str):
        self._artifact = artifact
        self.buffers = _StoredPlan(plan_text)

    @property
    def module(self):
        return self._artifact.optimized_module


class CachedArtifact(Artifact):
    """An ``Artifact`` read from the cache: runs the stored native code; ``optimized_module``
    is parsed from the stored IR text on first use (parsing costs more than loading);
    ``cost_analysis()`` / ``memory_analysis()`` are the ones stored when it was compiled."""

    def __init__(self, target: str, loaded, ir_text: str, plan_text: str):
        self.target = target
        self.loaded = loaded
        self.executable = loaded.executable
        self.ir_text = ir_text
        self._module = None
        self.optimize_result = _StoredResult(self, plan_text)

        from .targets import _runner
        self.run = _runner(target, loaded.executable)

    def module_text(self) -> str:
        return self.ir_text  # the stored text itself: no parse and print to save or show it

    @property
    def optimized_module(self):
        if self._module is None:
            from hlo.ir import parse_module
            self._module = parse_module(self.ir_text, "<compilation cache>")
        return self._module

    def cost_analysis(self):
        return self.loaded.cost_analysis()

    def memory_analysis(self):
        return self.loaded.memory_analysis()


# ----------------------------------------------------------------------------------------------
# Hook for targets.compile_module
# ----------------------------------------------------------------------------------------------

_unwritable: set = set()


class Pending:
    """A compile the cache was asked about: ``hit`` is the cached ``Artifact`` or None; after a
    miss, ``store(artifact)`` writes the compiled result."""

    def __init__(self, key: Key, path: str, hit=None):
        self.key = key
        self.path = path
        self.hit = hit

    def store(self, artifact, module) -> None:
        try:
            data = _entry_bytes(artifact, module, self.key)
        except Exception as e:  # an executable the format cannot hold is simply not cached
            log.info("hlo.cache: not caching %s: %s", self.path, e)
            return
        from hlo.runtime import hlox
        try:
            hlox.atomic_write(self.path, data)
        except OSError as e:
            folder = os.path.dirname(self.path)
            if folder not in _unwritable:  # once per folder, not on every compile
                _unwritable.add(folder)
                log.warning("hlo.cache: cannot write to the compilation cache %s (%s); compiled "
                            "programs are not kept (HLO_CACHE_DIR moves the cache, HLO_CACHE=0 "
                            "turns it off)", folder, e)
            return
        _account(os.path.dirname(self.path), len(data))


def begin(module, target: str, options: Optional[dict], dump_dir: Optional[str]) -> Optional[Pending]:
    """The cache's answer for one compile: None when the cache does not apply, else a
    ``Pending`` with ``hit`` set on a hit."""
    if bypass_reason(target, dump_dir, module) is not None:
        return None
    try:
        key = make_key(module, target, options)
    except Exception as e:  # the cache must never stop a compile
        log.warning("hlo.cache: cannot compute the cache key (%s: %s); compiling without the cache",
                    type(e).__name__, e)
        return None
    folder = entries_dir()
    if refuses_folder(log, "the compilation cache", "HLO_CACHE_DIR moves the cache", cache_dir(), folder):
        return None
    path = os.path.join(folder, key.filename)
    pending = Pending(key, path)
    if not os.path.exists(path):
        _log_miss(key)
        return pending
    try:
        try:
            payload, info = _read_entry(path)
        except FileNotFoundError:  # evicted or replaced by another process just now
            return pending
        if info.get("digest") != key.digest or info.get("parts") != key.parts:
            raise ValueError("its stored key does not match its file name")
        mapping = location_map(info.get("traced_text", ""), key.traced_text)
        if mapping is None:
            log.info("hlo.cache: %s: the source locations moved in a way the stored IR cannot "
                     "follow; compiling again", path)
            return pending
        pending.hit = _entry_artifact(payload, target, mapping, path)
    except Exception as e:
        _discard(path, e)
        return pending
    try:
        os.utime(path)  # least recently used = oldest modification time
    except OSError:
        pass
    _replay_warnings(info.get("warnings") or ())
    return pending


def _replay_warnings(messages: Sequence[str]) -> None:
    """Warnings the compile issued (a donation that cannot be honored) are issued again on a
    hit, so the cache does not hide them."""
    if not messages:
        return
    import warnings

    from hlo.passes.buffer_assignment import DonationWarning
    for msg in messages:
        warnings.warn(str(msg), DonationWarning, stacklevel=5)


def _log_miss(key: Key) -> None:
    from .. import config
    if not config.read("log_recompiles"):
        return
    same = _candidates(key, same_program_only=True)
    if not same:
        return
    log.warning("hlo.cache: %s", _explain(key, same))


# ----------------------------------------------------------------------------------------------
# Explaining misses
# ----------------------------------------------------------------------------------------------

def _candidates(key: Key, same_program_only: bool) -> List[Tuple[str, dict, float]]:
    folder = entries_dir()
    prefix = key.parts["program"][:16] + "-"
    out = []
    for mtime, _, path in _scan(folder):
        if same_program_only and not os.path.basename(path).startswith(prefix):
            continue
        try:
            _, info = _read_entry(path)
        except Exception:
            continue
        out.append((path, info, mtime))
    return out


def _differing(a: Dict[str, str], b: Dict[str, str]) -> List[str]:
    return [p for p in PART_ORDER if a.get(p) != b.get(p)]


def _describe_part(part: str, old: dict, key: Key) -> str:
    new_v = key.parts.get(part)
    old_v = old["parts"].get(part)
    if part == "program":
        a = strip_locations(old.get("traced_text", "")).splitlines()
        b = strip_locations(key.traced_text).splitlines()
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                return (f"program: the traced IR differs from line {i + 1}: entry has "
                        f"`{x.strip()}`, this call has `{y.strip()}`")
        return (f"program: the traced IR has {len(b)} lines, the entry's {len(a)}")
    if part == "options":
        try:
            oa, ob = json.loads(old_v), json.loads(new_v)
            ks = sorted(set(oa) | set(ob))
            diffs = [f"{k}: {oa.get(k, '(unset)')!r} -> {ob.get(k, '(unset)')!r}" for k in ks
                     if oa.get(k) != ob.get(k)]
            return "options: " + "; ".join(diffs)
        except (ValueError, TypeError, AttributeError):
            pass
    if part == "cpu" and old_v and new_v and old_v != "-" and new_v != "-":
        fa, fb = set(old_v.split(" ", 2)[-1].split(",")), set(new_v.split(" ", 2)[-1].split(","))
        ha, hb = old_v.split(" ")[:2], new_v.split(" ")[:2]
        bits = []
        if ha != hb:
            bits.append(f"{' '.join(ha)} -> {' '.join(hb)}")
        if fa != fb:
            bits.append(f"features {', '.join(sorted(fb - fa)[:6])} added, "
                        f"{', '.join(sorted(fa - fb)[:6])} removed")
        return "cpu: " + "; ".join(bits)
    return f"{part}: {old_v} -> {new_v}"


def _explain(key: Key, candidates: Sequence[Tuple[str, dict, float]]) -> str:
    best = min(candidates, key=lambda c: (len(_differing(c[1]["parts"], key.parts)), -c[2]))
    path, info, mtime = best
    diffs = _differing(info["parts"], key.parts)
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(mtime))
    details = "; ".join(_describe_part(p, info, key) for p in diffs)
    return (f"cache miss: the closest entry ({os.path.basename(path)}, last used {when}) differs in "
            f"{', '.join(diffs)}: {details}")


def explain(module, target: str, options: Optional[dict], dump_dir: Optional[str] = None) -> str:
    """One paragraph: would this compile hit the persistent cache, and if not, which key part
    differs from the closest entry."""
    why = bypass_reason(target, dump_dir, module)
    if why is not None:
        return f"not cached: {why}"
    key = make_key(module, target, options)
    path = os.path.join(entries_dir(), key.filename)
    if os.path.exists(path):
        try:
            _, info = _read_entry(path)
            if info.get("parts") == key.parts:
                if location_map(info.get("traced_text", ""), key.traced_text) is None:
                    return (f"cache miss: entry {path} has this program, but its source locations "
                            "moved in a way the stored IR cannot follow; it will be compiled again")
                return f"cache hit: {path}"
        except Exception as e:
            return f"cache miss: entry {path} is corrupted ({e}); it will be compiled again and replaced"
    cands = _candidates(key, same_program_only=False)
    if not cands:
        return f"cache miss: the cache ({entries_dir()}) has no entries"
    return _explain(key, cands)
