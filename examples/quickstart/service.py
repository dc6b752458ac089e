"""The HTTP endpoint you already have: a tiny refunds service for docs/quickstart.md.

`python examples/quickstart/service.py [PORT]` serves, on 127.0.0.1 (default port 7680; 0: any),
`POST /refunds` with a JSON body `{"order": ..., "amount": ...}`, answering the refund it made.
It knows nothing of capgate: the gateway governs it from outside."""

from __future__ import annotations

import itertools
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_IDS = itertools.count(1)


class Refunds(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        if self.path != "/refunds":
            self.send_error(404)
            return
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
        refund = {
            "refund_id": f"r-{next(_IDS)}",
            "order": body.get("order"),
            "amount": body.get("amount"),
            "status": "refunded",
        }
        data = json.dumps(refund).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


if __name__ == "__main__":
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 7680
    server = ThreadingHTTPServer(("127.0.0.1", port), Refunds)
    # The bound port (port 0 picks a free one): tests read it from this line.
    print(f"refunds service on http://127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()
