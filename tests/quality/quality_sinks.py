"""Real alert sinks on loopback for the tests: an SMTP server (aiosmtpd) and an HTTP server (http.server)."""

from __future__ import annotations

import email
import email.policy
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email.message import EmailMessage
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(predicate: Callable[[], bool], what: str, timeout: float = 60.0, last: Callable[[], Any] = str) -> None:
    """Wait until ``predicate()``; fail saying what was awaited and what was last seen."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"expected {what} within {timeout:.0f} s; last: {last()}")
        time.sleep(0.05)


@dataclass
class SmtpSink:
    port: int
    messages: list[EmailMessage] = field(default_factory=list)
    envelopes: list[tuple[str, list[str]]] = field(default_factory=list)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # aiosmtpd handler hook
        self.envelopes.append((envelope.mail_from, list(envelope.rcpt_tos)))
        message = email.message_from_bytes(envelope.content, policy=email.policy.default)
        self.messages.append(message)  # type: ignore[arg-type]
        return "250 OK"

    def connection(self) -> dict[str, Any]:
        """An Airflow SMTP connection to this server (plain SMTP, no TLS, no login)."""
        return {
            "conn_type": "smtp",
            "host": "127.0.0.1",
            "port": self.port,
            "extra": {"disable_tls": True, "disable_ssl": True, "from_email": "streamjoin@example.org", "timeout": 10},
        }

    @staticmethod
    def body(message: EmailMessage) -> str:
        part = message.get_body(preferencelist=("html", "plain"))
        return part.get_content() if part is not None else ""


@contextmanager
def smtp_sink() -> Iterator[SmtpSink]:
    from aiosmtpd.controller import Controller

    sink = SmtpSink(port=free_port())
    controller = Controller(sink, hostname="127.0.0.1", port=sink.port)
    controller.start()
    try:
        yield sink
    finally:
        controller.stop()


@dataclass
class HttpSink:
    port: int
    requests: list[dict[str, Any]] = field(default_factory=list)

    def connection(self, endpoint: str = "/alerts") -> dict[str, Any]:
        """An Airflow HTTP connection to this server."""
        return {
            "conn_type": "http",
            "host": "127.0.0.1",
            "port": self.port,
            "schema": "http",
            "extra": {"endpoint": endpoint},
        }


@contextmanager
def http_sink() -> Iterator[HttpSink]:
    sink = HttpSink(port=0)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            sink.requests.append(
                {"path": self.path, "content_type": self.headers.get("Content-Type"), "json": json.loads(body)}
            )
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    sink.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield sink
    finally:
        server.shutdown()
        server.server_close()
