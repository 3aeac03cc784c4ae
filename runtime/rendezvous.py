"""The launcher's rendezvous for torchrun-style runs: a small key-value store over TCP at the
coordinator's address (``MASTER_ADDR:MASTER_PORT``), as torch.distributed's TCPStore.

Process 0 serves it (``TcpStore(..., is_server=True)``: a thread of that process); every process,
the server's included, is a client. ``set(key, bytes)``, ``get(key)`` (waits until some process
has set it), ``add(key, n)`` (a counter; ``barrier(name)`` is built on it). Every wait is bounded
by the store's timeout (``hlo.runtime.processes.timeout_seconds()`` unless given): a key that
never comes, or a coordinator that is not there or has ended, is a ``DistributedError``
naming the address and the key, never a hang. NCCL's unique id travels through it
(``hlo.runtime.cuda.nccl``).

The wire format: each message is a 4-byte big-endian length and that many bytes; a request is
``op`` (one byte: ``S``et, ``G``et, ``A``dd), a 2-byte key length, the key, the value; a reply
is ``+`` and the value, or ``-`` and a message.
"""
from __future__ import annotations

import socket
import struct
import threading
import time
from typing import Dict, Optional, Tuple

from .processes import DistributedError, DistributedTimeoutError, timeout_seconds


def parse_address(address: str) -> Tuple[str, int]:
    """``host:port`` (``[v6]:port`` too) as (host, port); a clear error otherwise."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise DistributedError(f"coordinator address {address!r} is not host:port")
    return host.strip("[]"), int(port)


def _send(sock: socket.socket, payload: bytes) -> None:
    sock.sendall(struct.pack(">I", len(payload)) + payload)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        c = sock.recv(n - got)
        if not c:
            raise ConnectionError("connection closed")
        chunks.append(c)
        got += len(c)
    return b"".join(chunks)


def _recv(sock: socket.socket) -> bytes:
    (n,) = struct.unpack(">I", _recv_exact(sock, 4))
    return _recv_exact(sock, n)


class _Server:
    """The store itself: a listening socket and one thread per connected client."""

    def __init__(self, host: str, port: int):
        self.data: Dict[str, bytes] = {}
        self.cond = threading.Condition()
        self.closed = False
        self.conns: list = []
        self.sock = socket.create_server(("", port))  # every interface: peers use MASTER_ADDR
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._accept, name="hlo-rendezvous-server", daemon=True)
        self.thread.start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with self.cond:
                self.conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), name="hlo-rendezvous-client",
                             daemon=True).start()

    def _serve(self, conn: socket.socket):
        with conn:
            while True:
                try:
                    req = _recv(conn)
                except (ConnectionError, OSError):
                    return
                op, (klen,) = req[:1], struct.unpack(">H", req[1:3])
                key, value = req[3:3 + klen].decode(), req[3 + klen:]
                try:
                    reply = b"+" + self._do(op, key, value)
                except DistributedError as e:
                    reply = b"-" + str(e).encode()
                try:
                    _send(conn, reply)
                except (ConnectionError, OSError):
                    return

    def _do(self, op: bytes, key: str, value: bytes) -> bytes:
        with self.cond:
            if op == b"S":
                self.data[key] = value
                self.cond.notify_all()
                return b""
            if op == b"A":
                n = int(self.data.get(key, b"0")) + int(value)
                self.data[key] = str(n).encode()
                self.cond.notify_all()
                return str(n).encode()
            if op == b"G":
                # the client bounds the wait (its socket timeout); the server waits for the key
                # or its own close
                (limit,) = struct.unpack(">d", value)
                deadline = time.monotonic() + limit
                while key not in self.data and not self.closed:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return b"\x00"
                    self.cond.wait(min(left, 1.0))
                if key not in self.data:
                    raise DistributedError("process 0, which serves the store, is shutting down")
                return b"\x01" + self.data[key]
        raise DistributedError(f"rendezvous: unknown request {op!r}")

    def close(self):
        with self.cond:
            self.closed = True
            self.cond.notify_all()
            conns, self.conns = self.conns, []
        # shutdown wakes the thread blocked in accept (a close alone leaves the socket listening)
        for s in [self.sock, *conns]:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()


class TcpStore:
    """A client of the store at ``address`` (``host:port``); with ``is_server`` this process
    also serves it (process 0). ``timeout`` bounds every wait (connecting included)."""

    def __init__(self, address: str, is_server: bool = False, timeout: Optional[float] = None):
        self.address = address
        self.timeout = timeout_seconds() if timeout is None else float(timeout)
        host, port = parse_address(address)
        self._server: Optional[_Server] = None
        if is_server:
            try:
                self._server = _Server(host, port)
            except OSError as e:
                raise DistributedError(f"process 0 cannot serve the rendezvous at {address}: {e} "
                                       f"(is the port taken by another program, or by a second process started as process 0?)") from None
            port = self._server.port
        self.port = port
        self._lock = threading.Lock()
        self._sock = self._connect(host, port)

    def _connect(self, host: str, port: int) -> socket.socket:
        deadline = time.monotonic() + self.timeout
        last: Optional[Exception] = None
        while time.monotonic() < deadline:
            try:
                s = socket.create_connection((host, port), timeout=min(5.0, self.timeout))
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                return s
            except OSError as e:  # the server (process 0) may not be up yet
                last = e
                time.sleep(0.05)
        raise DistributedTimeoutError(f"no rendezvous at {self.address} within {self.timeout:g} s "
                                      f"(HLO_DISTRIBUTED_TIMEOUT): process 0 serves it; is it running, "
                                      f"and are MASTER_ADDR/MASTER_PORT the same for every process? "
                                      f"last error: {last}")

    def _request(self, op: bytes, key: str, value: bytes, wait: float) -> bytes:
        k = key.encode()
        with self._lock:
            try:
                self._sock.settimeout(wait + 10.0)
                _send(self._sock, op + struct.pack(">H", len(k)) + k + value)
                reply = _recv(self._sock)
            except socket.timeout:
                raise DistributedTimeoutError(f"the rendezvous at {self.address} did not answer "
                                              f"within {wait + 10:g} s (key {key!r})") from None
            except (ConnectionError, OSError) as e:
                raise DistributedError(f"the rendezvous at {self.address} closed the connection "
                                       f"(key {key!r}): process 0, which serves it, has ended or "
                                       f"failed ({e})") from None
        if reply[:1] != b"+":
            raise DistributedError(f"rendezvous at {self.address}: {reply[1:].decode(errors='replace')}")
        return reply[1:]

    def set(self, key: str, value: bytes) -> None:
        self._request(b"S", key, bytes(value), 0.0)

    def get(self, key: str, timeout: Optional[float] = None) -> bytes:
        """The value of ``key``, waiting (at most the timeout) until some process sets it."""
        limit = self.timeout if timeout is None else float(timeout)
        reply = self._request(b"G", key, struct.pack(">d", limit), limit)
        if reply[:1] != b"\x01":
            raise DistributedTimeoutError(f"rendezvous at {self.address}: no process set {key!r} "
                                          f"within {limit:g} s (HLO_DISTRIBUTED_TIMEOUT): a process "
                                          f"did not start, failed, or runs a different program")
        return reply[1:]

    def add(self, key: str, n: int) -> int:
        return int(self._request(b"A", key, str(int(n)).encode(), 0.0))

    def barrier(self, name: str, num_processes: int, timeout: Optional[float] = None) -> None:
        """Return once ``num_processes`` processes have called ``barrier(name, ...)``."""
        arrived = self.add(f"{name}/arrived", 1)
        if arrived == num_processes:
            self.set(f"{name}/done", b"1")
        try:
            self.get(f"{name}/done", timeout)
        except DistributedTimeoutError:
            got = int(self._request(b"A", f"{name}/arrived", b"0", 0.0))
            raise DistributedTimeoutError(f"barrier {name!r} at {self.address}: {got} of "
                                          f"{num_processes} processes arrived within "
                                          f"{self.timeout if timeout is None else timeout:g} s "
                                          f"(HLO_DISTRIBUTED_TIMEOUT)") from None

    def close(self) -> None:
        try:
            self._sock.close()
        except OSError:
            pass
        if self._server is not None:
            self._server.close()
            self._server = None
