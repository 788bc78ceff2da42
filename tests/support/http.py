"""A local HTTP server that refuses every request (403), as a store or a metadata service
that will not give access would; on 127.0.0.1, so a test never leaves loopback."""

from __future__ import annotations

import contextlib
import http.server
import threading
from collections.abc import Iterator

DENIED = b'<?xml version="1.0"?><Error><Code>AccessDenied</Code><Message>no</Message></Error>'


@contextlib.contextmanager
def refusing_server() -> Iterator[tuple[str, list[str]]]:
    """(its http:// URL, the requests it got as "METHOD path")."""
    asked: list[str] = []

    class Refuse(http.server.BaseHTTPRequestHandler):
        def _refuse(self) -> None:
            asked.append(f"{self.command} {self.path}")
            self.send_response(403)
            self.send_header("Content-Length", str(len(DENIED)))
            self.end_headers()
            self.wfile.write(DENIED)

        do_GET = do_PUT = do_HEAD = do_POST = do_DELETE = _refuse

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Refuse)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", asked
    finally:
        server.shutdown()
        server.server_close()
