"""GCS's XML API in front of fake-gcs-server, for the requests fake-gcs-server does not serve.

obstore (object_store) speaks GCS's XML API. fake-gcs-server serves its downloads, heads and
deletes, but not its uploads, its multipart uploads, nor a listing's start-after and pages
(fsouza/fake-gcs-server#331; object_store's own CI runs a fork). This server, run as its own
process beside fake-gcs-server (`python -m tests.support.gcs_xml PORT TARGET LOG`), answers those
requests by making the same request of fake-gcs-server's JSON API, one JSON request for each
XML one (the parts of a multipart upload are kept here until its completion, which is one JSON
upload), and passes every other request through unchanged. The objects, their generations and
the preconditions (ifGenerationMatch) are fake-gcs-server's own.

Each request is logged as one line, "METHOD KIND PATH": the store's own count of what it was
asked (KIND is list, put, multipart, or pass).
"""

from __future__ import annotations

import hashlib
import http.client
import json
import socket
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit
from xml.sax.saxutils import escape

PAGE = 1000  # GCS's XML listing page when none is asked for


class Gateway:
    def __init__(self, target: str, log: str) -> None:
        parts = urlsplit(target)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.log = open(log, "a", buffering=1)  # noqa: SIM115 (open as long as the process)
        self.lock = threading.Lock()
        self.uploads: dict[str, dict[int, bytes]] = {}

    def note(self, method: str, kind: str, path: str) -> None:
        with self.lock:
            self.log.write(f"{method} {kind} {path}\n")

    def fetch(
        self, method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
        try:
            conn.connect()  # headers and body leave at once, not 40 ms apart (Nagle)
            conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn.request(method, path, body=body, headers=headers or {})
            resp = conn.getresponse()
            return resp.status, dict(resp.getheaders()), resp.read()
        finally:
            conn.close()

    # -- the XML requests fake-gcs-server lacks ---------------------------------------------
    def list(self, bucket: str, q: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        """One page of a list-type=2 listing from one JSON listing: objects and prefixes in
        name order, at most max-keys of them together, after start-after (exclusive)."""
        prefix, delimiter = q.get("prefix", ""), q.get("delimiter", "")
        start = q.get("continuation-token") or q.get("start-after") or ""
        size = int(q.get("max-keys") or PAGE)
        params = {"prefix": prefix, "delimiter": delimiter, "maxResults": str(size)}
        if start:
            params["startOffset"] = start + "\x00"  # the first name after `start`
        query = "&".join(f"{k}={quote(v, safe='')}" for k, v in params.items() if v)
        status, headers, data = self.fetch("GET", f"/storage/v1/b/{quote(bucket)}/o?{query}")
        if status != 200:
            return status, headers, data
        page = json.loads(data)
        items = [(o["name"], o) for o in page.get("items", [])]
        prefixes = [(p, None) for p in page.get("prefixes", []) if p > start]
        entries = sorted(items + prefixes, key=lambda e: e[0])
        more = len(entries) > size or bool(page.get("nextPageToken"))
        entries = entries[:size]
        out = ["<?xml version='1.0' encoding='UTF-8'?><ListBucketResult>"]
        out.append(f"<Name>{escape(bucket)}</Name><Prefix>{escape(prefix)}</Prefix>")
        for name, obj in entries:
            if obj is None:
                out.append(f"<CommonPrefixes><Prefix>{escape(name)}</Prefix></CommonPrefixes>")
                continue
            out.append(
                f"<Contents><Key>{escape(name)}</Key><Size>{int(obj.get('size', 0))}</Size>"
                f"<LastModified>{obj['updated']}</LastModified>"
                f'<ETag>"{escape(obj.get("etag", ""))}"</ETag></Contents>'
            )
        out.append(f"<IsTruncated>{'true' if more and entries else 'false'}</IsTruncated>")
        if more and entries:
            out.append(f"<NextContinuationToken>{escape(entries[-1][0])}</NextContinuationToken>")
        out.append("</ListBucketResult>")
        return 200, {"Content-Type": "application/xml"}, "".join(out).encode()

    def upload(
        self, bucket: str, name: str, body: bytes, generation: str | None
    ) -> tuple[int, dict[str, str], bytes]:
        """A media upload through the JSON API; its answer as the XML API gives it."""
        query = f"uploadType=media&name={quote(name, safe='')}"
        if generation is not None:
            query += f"&ifGenerationMatch={generation}"
        status, headers, data = self.fetch(
            "POST",
            f"/upload/storage/v1/b/{quote(bucket)}/o?{query}",
            body,
            {"Content-Type": "application/octet-stream"},
        )
        if status != 200:
            return status, headers, data
        obj = json.loads(data)
        etag, generation = f'"{obj.get("etag", "")}"', str(obj["generation"])
        return 200, {"ETag": etag, "x-goog-generation": generation}, b""

    def start(self) -> tuple[int, dict[str, str], bytes]:
        upload_id = uuid.uuid4().hex
        with self.lock:
            self.uploads[upload_id] = {}
        body = (
            "<?xml version='1.0' encoding='UTF-8'?><InitiateMultipartUploadResult>"
            f"<UploadId>{upload_id}</UploadId></InitiateMultipartUploadResult>"
        )
        return 200, {"Content-Type": "application/xml"}, body.encode()

    def part(self, upload_id: str, number: int, body: bytes) -> tuple[int, dict[str, str], bytes]:
        with self.lock:
            parts = self.uploads.get(upload_id)
            if parts is None:
                return _no_such_upload()
            parts[number] = body
        return 200, {"ETag": f'"{hashlib.md5(body).hexdigest()}"'}, b""

    def complete(self, bucket: str, name: str, upload_id: str) -> tuple[int, dict[str, str], bytes]:
        with self.lock:
            parts = self.uploads.pop(upload_id, None)
        if parts is None:
            return _no_such_upload()
        whole = b"".join(parts[n] for n in sorted(parts))
        status, headers, data = self.upload(bucket, name, whole, None)
        if status != 200:
            return status, headers, data
        body = (
            "<?xml version='1.0' encoding='UTF-8'?><CompleteMultipartUploadResult>"
            f"<ETag>{escape(headers['ETag'])}</ETag></CompleteMultipartUploadResult>"
        )
        return 200, {**headers, "Content-Type": "application/xml"}, body.encode()

    def abort(self, upload_id: str) -> tuple[int, dict[str, str], bytes]:
        with self.lock:
            gone = self.uploads.pop(upload_id, None)
        return (204, {}, b"") if gone is not None else _no_such_upload()


def _no_such_upload() -> tuple[int, dict[str, str], bytes]:
    body = b"<?xml version='1.0' encoding='UTF-8'?><Error><Code>NoSuchUpload</Code></Error>"
    return 404, {"Content-Type": "application/xml"}, body


def _route(gw: Gateway, method: str, raw_path: str, headers: Any, body: bytes) -> tuple[str, Any]:
    """(kind, answer) for one request; answer None passes it through."""
    parts = urlsplit(raw_path)
    q = {k: v[0] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
    bucket, _, name = parts.path.lstrip("/").partition("/")
    bucket, name = unquote(bucket), unquote(name)
    if bucket in ("storage", "upload", "download", "batch", "_internal") or not bucket:
        return "pass", None
    if method == "GET" and not name and q.get("list-type") == "2":
        return "list", gw.list(bucket, q)
    if method == "PUT" and name and "uploadId" in q:
        return "multipart", gw.part(q["uploadId"], int(q["partNumber"]), body)
    if method == "PUT" and name:
        return "put", gw.upload(bucket, name, body, headers.get("x-goog-if-generation-match"))
    if method == "POST" and name and "uploads" in q:
        return "multipart", gw.start()
    if method == "POST" and name and "uploadId" in q:
        return "multipart", gw.complete(bucket, name, q["uploadId"])
    if method == "DELETE" and name and "uploadId" in q:
        return "multipart", gw.abort(q["uploadId"])
    return "pass", None


def serve(port: int, target: str, log: str) -> ThreadingHTTPServer:
    gw = Gateway(target, log)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        wbufsize = 1 << 16  # an answer's head and body in one write: no delayed-ACK wait

        def handle_one(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            kind, answer = _route(gw, self.command, self.path, self.headers, body)
            gw.note(self.command, kind, self.path)
            if answer is None:
                skip = ("host", "connection", "content-length")
                sent = {k: v for k, v in self.headers.items() if k.lower() not in skip}
                answer = gw.fetch(self.command, self.path, body, sent)
            status, headers, data = answer
            self.send_response(status)
            for k, v in headers.items():
                if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                    self.send_header(k, v)
            head = self.command == "HEAD"
            length = headers.get("Content-Length", "0") if head else str(len(data))
            self.send_header("Content-Length", length)
            self.end_headers()
            if not head:
                self.wfile.write(data)

        do_GET = do_HEAD = do_POST = do_PUT = do_DELETE = handle_one

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    return server


if __name__ == "__main__":
    serve(int(sys.argv[1]), sys.argv[2], sys.argv[3]).serve_forever()
