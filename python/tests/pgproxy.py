"""A TCP proxy in front of the test cluster (which listens on a Unix
socket) that reads the client's side of the PostgreSQL protocol and drops
the connection at a chosen point of the nth batch a live log writes:

- ``"statement"``: when the batch's statement comes (a Parse or Query
  that names the saver's ``.publish...`` functions), before it reaches
  the server (nothing was committed);
- ``"commit"``: right after it forwarded the COMMIT that follows it, with
  the server's reply held back (the commit is in doubt, and landed);
- ``"swallow"``: at that COMMIT, which is not forwarded (in doubt, and
  not landed: the server sees the connection end inside the transaction).

With ``dead=True`` every connection after the drop is closed at once (a
server that never comes back)."""

from __future__ import annotations

import os
import socket
import threading
from typing import Any

import psycopg

COMMIT = b"Q\x00\x00\x00\x0bCOMMIT\x00"
_NEGOTIATIONS = (80877103, 80877104)  # SSLRequest, GSSENCRequest


class Proxy:
    def __init__(self, at: str, nth: int, *, dead: bool = False) -> None:
        self.at = at
        self.nth = nth
        self.dead = dead
        self.batches = 0        # batch statements seen
        self.dropped = 0        # connections dropped
        self._lock = threading.Lock()
        self._socks: list[socket.socket] = []
        host = os.environ.get("PGHOST", "/tmp")
        self._target = os.path.join(host, f".s.PGSQL.{os.environ.get('PGPORT', '5432')}")
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def dsn(self, dsn: str) -> str:
        return psycopg.conninfo.make_conninfo(dsn, host="127.0.0.1", port=self.port, sslmode="disable", gssencmode="disable")

    def close(self) -> None:
        self._listener.close()
        with self._lock:
            for s in self._socks:
                _kill(s)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                if self.dead and self.dropped > 0:
                    _kill(client)
                    continue
            server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            server.connect(self._target)
            with self._lock:
                self._socks += [client, server]
            state: dict[str, Any] = {"muted": False, "batch": 0}
            threading.Thread(target=self._upstream, args=(client, server, state), daemon=True).start()
            threading.Thread(target=self._downstream, args=(server, client, state), daemon=True).start()

    def _downstream(self, server: socket.socket, client: socket.socket, state: dict[str, Any]) -> None:
        try:
            while data := server.recv(65536):
                if state["muted"]:
                    continue
                client.sendall(data)
        except OSError:
            pass
        _kill(client)

    def _upstream(self, client: socket.socket, server: socket.socket, state: dict[str, Any]) -> None:
        buf = b""
        started = False
        try:
            while data := client.recv(65536):
                buf += data
                out = b""
                while True:
                    if not started:
                        if len(buf) < 8 or len(buf) < int.from_bytes(buf[:4], "big"):
                            break
                        n = int.from_bytes(buf[:4], "big")
                        msg, buf = buf[:n], buf[n:]
                        started = int.from_bytes(msg[4:8], "big") not in _NEGOTIATIONS
                        out += msg
                        continue
                    if len(buf) < 5 or len(buf) < 1 + int.from_bytes(buf[1:5], "big"):
                        break
                    n = 1 + int.from_bytes(buf[1:5], "big")
                    msg, buf = buf[:n], buf[n:]
                    act = self._decide(msg, state)
                    if act == "drop":
                        self._drop(client, server)
                        return
                    if act == "after":
                        state["muted"] = True
                        server.sendall(out + msg)
                        self._drop(client, server)
                        return
                    out += msg
                if out:
                    server.sendall(out)
        except OSError:
            pass
        _kill(server)
        _kill(client)

    def _decide(self, msg: bytes, state: dict[str, Any]) -> str:
        with self._lock:
            if msg[:1] in (b"P", b"Q") and b".publish" in msg:
                self.batches += 1
                state["batch"] = self.batches
                if self.at == "statement" and self.batches == self.nth and self.dropped == 0:
                    return "drop"
            elif msg == COMMIT and state["batch"] == self.nth and self.dropped == 0:
                if self.at == "commit":
                    return "after"
                if self.at == "swallow":
                    return "drop"
        return "forward"

    def _drop(self, client: socket.socket, server: socket.socket) -> None:
        with self._lock:
            self.dropped += 1
        _kill(client)
        _kill(server)


def _kill(s: socket.socket) -> None:
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    s.close()
