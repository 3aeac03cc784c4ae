"""hlo.distributed.initialize() and what it reads: the launchers' variables
(hlo.runtime.processes), the torchrun-style rendezvous (hlo.runtime.rendezvous, a TCP store at
MASTER_ADDR:MASTER_PORT) with real processes, and the errors for what is missing or
contradictory. No MPI needed (tests/distributed/test_mpi.py runs the MPI launches)."""
import os
import socket
import subprocess
import sys
import threading
import time

import pytest

import hlo
from hlo.runtime import processes
from hlo.runtime.processes import DistributedError, DistributedTimeoutError, from_environment
from hlo.runtime.rendezvous import TcpStore, parse_address

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_open_mpi_variables():
    e = from_environment({"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4",
                          "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"})
    assert (e.process_id, e.num_processes, e.local_process_id, e.local_num_processes, e.transport) == \
        (3, 4, 1, 2, "mpi")
    assert "Open MPI" in e.source


def test_pmi_and_pmix_variables():
    e = from_environment({"PMI_RANK": "1", "PMI_SIZE": "2", "MPI_LOCALRANKID": "1"})
    assert (e.process_id, e.num_processes, e.local_process_id, e.transport) == (1, 2, 1, "mpi")
    e = from_environment({"PMIX_RANK": "5"})
    assert (e.process_id, e.num_processes, e.transport) == (5, None, "mpi")  # MPI gives the size


def test_mpi_launchers_come_before_torchrun_variables():
    e = from_environment({"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2", "RANK": "1",
                          "WORLD_SIZE": "2"})
    assert e.transport == "mpi" and e.process_id == 0


def test_torchrun_variables():
    e = from_environment({"RANK": "2", "WORLD_SIZE": "4", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2",
                          "MASTER_ADDR": "node0", "MASTER_PORT": "29500"})
    assert (e.process_id, e.num_processes, e.local_process_id, e.local_num_processes) == (2, 4, 0, 2)
    assert (e.coordinator_address, e.transport) == ("node0:29500", "tcp")
    one = from_environment({"RANK": "0", "WORLD_SIZE": "1"})
    assert (one.coordinator_address, one.transport) == (None, "none")


def test_no_launcher():
    assert from_environment({}) is None
    assert from_environment({"LOCAL_RANK": "0"}) is None  # set by many tools on its own


@pytest.mark.parametrize("env, message", [
    ({"RANK": "1"}, "RANK set but WORLD_SIZE missing"),
    ({"WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "1"}, "but RANK missing"),
    ({"RANK": "0", "WORLD_SIZE": "2"}, "needs the coordinator's address: MASTER_ADDR and MASTER_PORT not set"),
    ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "h"}, "MASTER_PORT not set"),
    ({"RANK": "x", "WORLD_SIZE": "2"}, "RANK='x' is not a whole number"),
    ({"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "two"}, "OMPI_COMM_WORLD_SIZE='two'"),
])
def test_incomplete_or_bad_variables_are_named(env, message):
    with pytest.raises(DistributedError, match=message):
        from_environment(env)


def test_timeout_setting():
    assert processes.timeout_seconds({}) == processes.DEFAULT_TIMEOUT
    assert processes.timeout_seconds({"HLO_DISTRIBUTED_TIMEOUT": "2.5"}) == 2.5
    for bad in ("0", "-1", "soon", "inf", "nan"):
        with pytest.raises(DistributedError, match="HLO_DISTRIBUTED_TIMEOUT=.* is not a timeout"):
            processes.timeout_seconds({"HLO_DISTRIBUTED_TIMEOUT": bad})


def test_check_setting():
    assert processes.check_collectives({}) is True
    assert processes.check_collectives({"HLO_DISTRIBUTED_CHECK": "0"}) is False
    assert processes.check_collectives({"HLO_DISTRIBUTED_CHECK": "on"}) is True
    with pytest.raises(DistributedError, match="HLO_DISTRIBUTED_CHECK='maybe': 1"):
        processes.check_collectives({"HLO_DISTRIBUTED_CHECK": "maybe"})


@pytest.mark.parametrize("kw, message", [
    (dict(process_id=2, num_processes=2), "process_id 2 is not in 0..1"),
    (dict(process_id=0, num_processes=0), "num_processes must be at least 1"),
])
def test_process_info_checks(kw, message):
    with pytest.raises(DistributedError, match=message):
        processes.ProcessInfo(**kw)


def test_addresses():
    assert parse_address("node0:29500") == ("node0", 29500)
    assert parse_address("[::1]:80") == ("::1", 80)
    for bad in ("node0", ":80", "h:0", "h:99999", "h:p"):
        with pytest.raises(DistributedError, match="is not host:port"):
            parse_address(bad)


# --- the frontend, in this process (no launcher: the tests clear the variables) -----------------

@pytest.fixture
def no_launcher(monkeypatch):
    for v in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "OMPI_COMM_WORLD_RANK",
              "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE", "PMIX_RANK"):
        monkeypatch.delenv(v, raising=False)
    yield
    hlo.distributed.shutdown()


def test_without_initialize_the_run_is_one_process(no_launcher):
    d = hlo.distributed
    assert not d.is_initialized()
    assert (d.process_index(), d.process_count(), d.local_process_index(), d.local_process_count()) == (0, 1, 0, 1)
    with pytest.raises(DistributedError, match="initialize\\(\\) has not been called"):
        d.cpu_transport()


def test_initialize_without_a_launcher_says_how_to_launch(no_launcher):
    with pytest.raises(DistributedError, match="no launcher's variables are set; launch it with `mpirun -n N"):
        hlo.distributed.initialize()
    with pytest.raises(DistributedError, match="2 processes need a coordinator_address"):
        hlo.distributed.initialize(num_processes=2, process_id=0)
    with pytest.raises(DistributedError, match="process_id is missing"):
        hlo.distributed.initialize(num_processes=2)
    assert not hlo.distributed.is_initialized()


def test_initialize_twice(no_launcher):
    d = hlo.distributed
    d.initialize(num_processes=1, process_id=0)
    assert d.is_initialized() and (d.process_index(), d.process_count()) == (0, 1)
    d.initialize(num_processes=1, process_id=0)  # the same again: nothing to do
    with pytest.raises(DistributedError, match="called before with other arguments \\(num_processes=1, "
                                               "process_id=0\\); now \\(coordinator_address="):
        d.initialize(num_processes=2, process_id=1, coordinator_address="localhost:1")
    with pytest.raises(DistributedError, match="over 'none'.*launch it with `mpirun -n 1"):
        d.cpu_transport()
    d.shutdown()
    assert not d.is_initialized() and d.process_count() == 1


def test_mpi_launch_without_mpi_is_a_clear_error(no_launcher, monkeypatch):
    """An MPI launcher's variables where mpi4py cannot be imported (a stand-in module that
    raises ImportError, as an absent one does)."""
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "0")
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "2")
    monkeypatch.setitem(sys.modules, "mpi4py", None)
    monkeypatch.setattr("hlo.runtime.cpu.mpi_collectives._world", None)
    with pytest.raises(DistributedError, match="MPI is not available.*apt-get install openmpi-bin libopenmpi-dev, "
                                               "then pip install 'hlo\\[mpi\\]'"):
        hlo.distributed.initialize()
    assert not hlo.distributed.is_initialized()


# --- the TCP store -------------------------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def test_store_set_get_add_barrier_across_clients():
    addr = f"127.0.0.1:{free_port()}"
    server = TcpStore(addr, is_server=True, timeout=10)
    client = TcpStore(addr, timeout=10)
    try:
        got = []
        t = threading.Thread(target=lambda: got.append(client.get("k")))
        t.start()
        time.sleep(0.05)
        server.set("k", b"\x00value")
        t.join(10)
        assert got == [b"\x00value"]
        assert server.add("n", 2) == 2 and client.add("n", 3) == 5
        t = threading.Thread(target=lambda: client.barrier("b", 2))
        t.start()
        server.barrier("b", 2)
        t.join(10)
        assert not t.is_alive()
    finally:
        client.close()
        server.close()


def test_store_waits_are_bounded():
    addr = f"127.0.0.1:{free_port()}"
    server = TcpStore(addr, is_server=True, timeout=0.5)
    try:
        with pytest.raises(DistributedTimeoutError, match="no process set 'never' within 0.5 s"):
            server.get("never")
        with pytest.raises(DistributedTimeoutError, match="barrier 'b'.*1 of 2 processes arrived"):
            server.barrier("b", 2)
    finally:
        server.close()
    with pytest.raises(DistributedTimeoutError, match="no rendezvous at 127.0.0.1:.* within 0.3 s"):
        TcpStore(addr, timeout=0.3)


def test_a_client_learns_that_the_coordinator_ended():
    addr = f"127.0.0.1:{free_port()}"
    server = TcpStore(addr, is_server=True, timeout=10)
    client = TcpStore(addr, timeout=10)
    t0 = time.monotonic()
    threading.Timer(0.2, server.close).start()
    with pytest.raises(DistributedError, match="shutting down|closed the connection"):
        client.get("never")
    assert time.monotonic() - t0 < 10
    client.close()


# --- torchrun-style runs: real processes ---------------------------------------------------------

PROG = """
import hlo, sys
d = hlo.distributed
d.initialize()
print("joined", d.process_index(), d.process_count(), d.local_process_index(), flush=True)
store = d.rendezvous()
store.set(f"hello/{d.process_index()}", str(d.process_index() * 10).encode())
other = (d.process_index() + 1) % d.process_count()
print("got", int(store.get(f"hello/{other}")), flush=True)
d.shutdown()
"""


def launch(n, port, extra_env=lambda i: {}, prog=PROG, timeout="20"):
    procs = []
    for i in range(n):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMI"))}
        env.update(RANK=str(i), WORLD_SIZE=str(n), LOCAL_RANK=str(i), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), HLO_DISTRIBUTED_TIMEOUT=timeout)
        env.update(extra_env(i))
        procs.append(subprocess.Popen([sys.executable, "-c", prog], cwd=ROOT, env=env, text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    outs = []
    for p in procs:
        try:
            outs.append((p.wait(60), p.stdout.read()))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail("a torchrun-style process hung")
    return outs


def test_torchrun_style_run_of_two_processes():
    outs = launch(2, free_port())
    for i, (rc, out) in enumerate(outs):
        assert rc == 0, out
        assert f"joined {i} 2 {i}" in out and f"got {((i + 1) % 2) * 10}" in out, out


def test_torchrun_style_errors_are_bounded_and_name_the_problem():
    # two processes that both claim RANK=1
    outs = launch(3, free_port(), extra_env=lambda i: {"RANK": str(min(i, 1))}, timeout="2")
    text = "".join(o for _, o in outs)
    assert "two processes started as process 1 of 3" in text, text
    # a process that never comes: the one that did fails after the timeout, naming the count
    rc, out = launch(1, free_port(), extra_env=lambda i: {"WORLD_SIZE": "2"}, timeout="1")[0]
    assert rc != 0 and "barrier 'hlo/init'" in out and "1 of 2 processes arrived" in out, out
