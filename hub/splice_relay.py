"""Relays TCP connections in the kernel on a thread of their own (Linux ``os.splice``).

``hub.agentgate`` hands each accepted agent connection, with its loopback connection to the
gRPC server, to one ``SpliceRelay``. A single thread running its own ``selectors`` loop moves
the bytes socket -> pipe -> socket with ``os.splice``: they never enter Python, and the hub's
event loop only accepts connections. Before the client's first bytes move they are peeked
(``MSG_PEEK``) so the gate learns whether the client began a TLS handshake. When either side
ends or fails, both sockets close and the connection's ``on_closed`` is called with that
answer, on the relay thread (the gate moves it onto its event loop).

Bounds: one thread however many connections; each connection holds its 2 sockets and 2
non-blocking pipes (6 descriptors; a pipe holds 64 KiB, so at most 128 KiB in flight a
connection). Past the per-user pipe budget (``/proc/sys/fs/pipe-user-pages-soft``, 512
connections at the default) Linux gives new pipes one page: slower, still correct. A
connection whose pipes cannot be made (out of descriptors) is closed; the agent reconnects.
``AVAILABLE`` is false where ``os.splice`` is missing (not Linux, or Python < 3.10).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import selectors
import socket
import threading
from collections import deque
from collections.abc import Callable

log = logging.getLogger(__name__)
AVAILABLE = hasattr(os, "splice")
CHUNK = 64 * 1024              # a pipe's default capacity
ROUNDS = 16                    # chunks one direction moves per event before others get a turn
TLS_HANDSHAKE = b"\x16"        # first byte of a TLS handshake record (the ClientHello)
_FLAGS = getattr(os, "SPLICE_F_MOVE", 0) | getattr(os, "SPLICE_F_NONBLOCK", 0)

Closed = Callable[[bool], None]    # called with "the client began a TLS handshake"
THREAD_NAME = "fuyao-gate"     # its name in /proc (and top -H): its CPU apart from the loop's
_PR_SET_NAME = 15


class _Flow:
    """One direction of a connection: ``src`` -> pipe -> ``dst``."""

    __slots__ = ("dst", "pending", "pipe_r", "pipe_w", "src")

    def __init__(self, src: socket.socket, dst: socket.socket) -> None:
        self.src, self.dst = src, dst
        self.pipe_r, self.pipe_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.pending = 0           # bytes in the pipe not yet written to dst

    def pump(self) -> bool:
        """Move what ``src`` has to ``dst`` until either would block; False at end of stream."""
        for _ in range(ROUNDS):
            self.push()
            if self.pending:
                return True
            try:
                moved = os.splice(self.src.fileno(), self.pipe_w, CHUNK, flags=_FLAGS)
            except BlockingIOError:
                return True
            if moved == 0:
                return False
            self.pending = moved
            if moved < CHUNK:      # likely all there was: the selector says if more came
                break
        self.push()
        return True

    def push(self) -> None:
        """Write the pipe's bytes to ``dst`` until it would block."""
        while self.pending:
            try:
                moved = os.splice(self.pipe_r, self.dst.fileno(), self.pending, flags=_FLAGS)
            except BlockingIOError:
                return
            if moved == 0:
                raise ConnectionError("the relay's pipe gave no bytes")
            self.pending -= moved

    def close(self) -> None:
        os.close(self.pipe_r)
        os.close(self.pipe_w)


class _Spliced:
    """One relayed connection: the client's socket and the loopback socket to the server."""

    def __init__(self, outer: socket.socket, inner: socket.socket, on_closed: Closed) -> None:
        self.outer, self.inner, self.on_closed = outer, inner, on_closed
        self.up = _Flow(outer, inner)
        try:
            self.down = _Flow(inner, outer)
        except OSError:
            self.up.close()
            raise
        self.tls = False
        self.peeked = False
        self.masks = {outer.fileno(): 0, inner.fileno(): 0}

    def handle(self, sock: socket.socket, events: int) -> bool:
        """Relay what ``events`` on ``sock`` allow; False when the connection has ended."""
        try:
            if events & selectors.EVENT_READ:
                if sock is self.outer and not self.peeked:
                    self._peek()
                if not (self.up if sock is self.outer else self.down).pump():
                    return False
            if events & selectors.EVENT_WRITE:
                (self.down if sock is self.outer else self.up).push()
        except OSError:
            return False
        return True

    def _peek(self) -> None:
        first = self.outer.recv(1, socket.MSG_PEEK)
        self.peeked = bool(first)
        self.tls = first == TLS_HANDSHAKE

    def wanted(self, sock: socket.socket) -> int:
        """The events ``sock`` waits for: readable while its outgoing pipe is empty,
        writable while its incoming pipe holds bytes."""
        outgoing, incoming = (self.up, self.down) if sock is self.outer else (self.down, self.up)
        return ((0 if outgoing.pending else selectors.EVENT_READ)
                | (selectors.EVENT_WRITE if incoming.pending else 0))

    def close(self) -> None:
        for flow in (self.up, self.down):
            flow.close()
        for sock in (self.outer, self.inner):
            sock.close()


class SpliceRelay:
    """One thread that relays every connection handed to it until ``close``."""

    def __init__(self) -> None:
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ)
        self._incoming: deque[_Spliced] = deque()
        self._live: set[_Spliced] = set()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name=THREAD_NAME, daemon=True)
        self._thread.start()

    def add(self, outer: socket.socket, inner: socket.socket, on_closed: Closed) -> None:
        """Relay ``outer`` <-> ``inner`` (both connected) from now on; the relay owns them.
        Raises ``OSError`` (the sockets are left to the caller) when its pipes cannot be made
        or the relay is closed."""
        if self._stopping:
            raise ConnectionError("the relay is closed")
        for sock in (outer, inner):
            sock.setblocking(False)
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._incoming.append(_Spliced(outer, inner, on_closed))
        self._wake()

    def close(self) -> None:
        """End every relayed connection (without ``on_closed``) and the thread."""
        self._stopping = True
        self._wake()
        self._thread.join(timeout=5)

    def _wake(self) -> None:
        with contextlib.suppress(OSError):   # a wake-up is already pending, or it has ended
            self._wake_w.send(b"\0")

    def _run(self) -> None:
        with contextlib.suppress(OSError, AttributeError):    # not Linux: unnamed
            ctypes.CDLL(None).prctl(_PR_SET_NAME, THREAD_NAME.encode(), 0, 0, 0)
        try:
            while not self._stopping:
                for key, events in self._selector.select():
                    if key.fileobj is self._wake_r:
                        self._admit()
                    else:
                        self._handle(key.data, key.fileobj, events)   # type: ignore[arg-type]
        except Exception:
            log.exception("agent gate: the relay thread failed")
        finally:
            self._shut()

    def _admit(self) -> None:
        with contextlib.suppress(BlockingIOError):
            self._wake_r.recv(4096)
        while self._incoming:
            spliced = self._incoming.popleft()
            self._live.add(spliced)
            for sock in (spliced.outer, spliced.inner):
                self._watch(spliced, sock)

    def _handle(self, spliced: _Spliced, sock: socket.socket, events: int) -> None:
        if spliced not in self._live:
            return                 # ended by its other socket's event in this same batch
        if not spliced.handle(sock, events):
            self._end(spliced)
            with contextlib.suppress(Exception):
                spliced.on_closed(spliced.tls)
            return
        for each in (spliced.outer, spliced.inner):
            self._watch(spliced, each)

    def _watch(self, spliced: _Spliced, sock: socket.socket) -> None:
        fd, mask = sock.fileno(), spliced.wanted(sock)
        old = spliced.masks[fd]
        if mask == old:
            return
        if not old:
            self._selector.register(sock, mask, spliced)
        elif not mask:
            self._selector.unregister(sock)
        else:
            self._selector.modify(sock, mask, spliced)
        spliced.masks[fd] = mask

    def _end(self, spliced: _Spliced) -> None:
        self._live.discard(spliced)
        for sock in (spliced.outer, spliced.inner):
            if spliced.masks[sock.fileno()]:
                self._selector.unregister(sock)
        spliced.close()

    def _shut(self) -> None:
        self._stopping = True      # (also after a failure: ``add`` refuses from now on)
        for spliced in list(self._live) + list(self._incoming):
            self._live.discard(spliced)
            with contextlib.suppress(OSError, KeyError, ValueError):
                self._end(spliced)
        self._incoming.clear()
        self._selector.close()
        self._wake_r.close()
        self._wake_w.close()
