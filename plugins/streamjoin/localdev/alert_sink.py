"""A loopback receiver for the default alert webhook (``include/alerts.yaml``, ``scripts/env.sh``): each
alert POSTed to it is appended to ``var/alerts/received.jsonl`` and its subject line printed.

    python -m streamjoin.localdev.alert_sink [--port 18461] [--out var/alerts/received.jsonl]

For trying alerts on one machine; point the ``streamjoin_alerts_webhook`` connection at Slack (or another
receiver) for real use.
"""

from __future__ import annotations

import argparse
import json
import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from streamjoin.core.plans import PROJECT_HOME

DEFAULT_PORT = 18461
DEFAULT_OUT = PROJECT_HOME / "var" / "alerts" / "received.jsonl"


def serve(port: int, out: Path) -> ThreadingHTTPServer:
    """A server on 127.0.0.1:``port`` appending each POSTed JSON body to ``out`` (call ``serve_forever``)."""
    out.parent.mkdir(parents=True, exist_ok=True)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            try:
                payload = json.loads(body)
            except ValueError:
                self.send_response(400)
                self.end_headers()
                return
            with out.open("a") as handle:
                handle.write(json.dumps({"path": self.path, "alert": payload}) + "\n")
            first = str(payload.get("text", "")).splitlines()[:1] if isinstance(payload, dict) else []
            print(f"alert received on {self.path}: {first[0] if first else payload}", flush=True)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: object) -> None:
            pass

    return ThreadingHTTPServer(("127.0.0.1", port), Handler)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="alert_sink", description=__doc__)
    parser.add_argument("--port", type=int, default=int(os.environ.get("STREAMJOIN_ALERT_SINK_PORT", DEFAULT_PORT)))
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    server = serve(args.port, args.out)
    print(f"alert sink on http://127.0.0.1:{args.port}/ writing {args.out}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
