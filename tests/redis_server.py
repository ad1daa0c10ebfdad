"""A real Redis from Debian's ``redis-server`` on a free loopback port, started by the tests that need one and
stopped after them (no persistence: each run starts empty)."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import pytest

from streamvoice.asgi import free_port
from tests.helpers import system_binary


class RedisServer:
    def __init__(self, folder: Path) -> None:
        binary = system_binary("redis-server", package="redis-server")
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(folder)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )  # fmt: skip
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as conn:
                    conn.sendall(b"PING\r\n")
                    if conn.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.05)
        self.stop()
        pytest.fail("redis-server did not answer PING within 20 s")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
