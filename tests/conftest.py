"""Session-wide test settings: the persistent compilation cache lives in a fresh temporary
folder for each test session (set before hlo compiles anything, and inherited by the
subprocesses tests start), so the suite never reads or writes the user's real cache
(~/.cache/hlo) and never depends on what an earlier session left there."""
import os
import shutil
import tempfile

_SESSION_CACHE = tempfile.mkdtemp(prefix="hlo-test-cache-")
os.environ["HLO_CACHE_DIR"] = _SESSION_CACHE
os.environ.pop("HLO_CACHE_MAX_BYTES", None)


def pytest_sessionfinish(session, exitstatus):
    shutil.rmtree(_SESSION_CACHE, ignore_errors=True)
