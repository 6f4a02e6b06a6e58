"""A local HTTP server that misbehaves on purpose, for the network tests (issue 44): it accepts
and never answers ("silent"), reads the request and sends nothing until it closes after
`stall_seconds` ("stall"), answers at 20 kB/s ("trickle"), or serves `data` with ranges but
closes the connection after `cut_after` bytes of each body ("cut")."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import threading
import time


class FaultServer:
    def __init__(self, mode: str, data: bytes = b"\0" * (1 << 20), stall_seconds: float = 25.0,
                 cut_after: int = 4096, rate: int = 20_000):
        self.mode, self.data = mode, data
        self.stall_seconds, self.cut_after, self.rate = stall_seconds, cut_after, rate
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.done = threading.Event()
        self.requests = 0
        self.conns = []
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, rel: str) -> str:
        return f"http://127.0.0.1:{self.port}/{rel}"

    def close(self) -> None:
        self.done.set()
        self.sock.close()
        for c in self.conns:
            try:
                c.close()
            except OSError:
                pass

    def _accept(self) -> None:
        while not self.done.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _request(self, conn) -> str:
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = conn.recv(4096)
            if not chunk:
                return ""
            buf += chunk
        self.requests += 1
        return buf.decode("latin-1")

    def _serve(self, conn) -> None:
        try:
            if self.mode == "silent":
                self.done.wait()
                return
            while not self.done.is_set():
                req = self._request(conn)
                if not req:
                    return
                if self.mode == "stall":
                    self.done.wait(self.stall_seconds)
                    return
                total = len(self.data)
                m = re.search(r"(?i)^range:\s*bytes=(\d+)-(\d*)", req, re.M)
                start = int(m.group(1)) if m else 0
                end = min(int(m.group(2)) + 1, total) if m and m.group(2) else total
                body = self.data[start:end]
                head = ("HTTP/1.1 206 Partial Content\r\n" if m else "HTTP/1.1 200 OK\r\n")
                head += (f"Content-Length: {len(body)}\r\nAccept-Ranges: bytes\r\n"
                         f"Connection: keep-alive\r\n")
                if m:
                    head += f"Content-Range: bytes {start}-{end - 1}/{total}\r\n"
                conn.sendall((head + "\r\n").encode())
                if self.mode == "trickle":
                    step = max(1, self.rate // 20)
                    for i in range(0, len(body), step):
                        if self.done.is_set():
                            return
                        conn.sendall(body[i:i + step])
                        time.sleep(0.05)
                elif self.mode == "cut":
                    conn.sendall(body[:self.cut_after])
                    return  # the connection closes before the body's end
                else:
                    conn.sendall(body)
        except OSError:
            pass
        finally:
            try:
                conn.close()
            except OSError:
                pass


NGINX = next((p for p in ("/usr/sbin/nginx", "/usr/bin/nginx") if os.access(p, os.X_OK)), None)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _accepts(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


class Nginx:
    """nginx in the foreground (a child of this process), serving `root` on a free port."""

    def __init__(self, root, prefix, extra: str = ""):
        self.port = _free_port()
        self.prefix = prefix
        (prefix / "logs").mkdir(parents=True, exist_ok=True)
        temps = "".join(f"  {t}_temp_path {prefix}/{t};\n"
                        for t in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        user = "user root;\n" if os.geteuid() == 0 else ""
        (prefix / "nginx.conf").write_text(
            f"daemon off;\nmaster_process off;\nworker_processes 1;\npid {prefix}/nginx.pid;\n"
            f"error_log {prefix}/logs/error.log;\n{user}events {{ worker_connections 64; }}\n"
            f"http {{\n  access_log off;\n  default_type application/octet-stream;\n{temps}"
            f"  server {{\n    listen 127.0.0.1:{self.port};\n    root {root};\n{extra}  }}\n}}\n")
        self.proc = None
        self.start()

    def start(self):
        self.proc = subprocess.Popen([NGINX, "-p", str(self.prefix), "-c",
                                      str(self.prefix / "nginx.conf")],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(500):
            if _accepts(self.port):
                return
            time.sleep(0.01)
        raise RuntimeError(f"nginx did not start; see {self.prefix}/logs/error.log")

    def stop(self):
        if self.proc is not None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=10)
            self.proc = None
        for _ in range(100):  # the port is closed once the process is gone
            if not _accepts(self.port):
                return
            time.sleep(0.01)

    def url(self, rel: str) -> str:
        return f"http://127.0.0.1:{self.port}/{rel}"
