"""A stand-in for Azure AD's token endpoint (login.microsoftonline.com) and for the metadata
service that gives a managed identity its tokens, for the queue tests: neither can be reached
from here, and what is tested is our client and Azurite's Queue
service, which checks the token it is given.

It answers the client-credentials grant the Azure SDKs and object_store send: for the one
application it knows, with its secret or with a federated token (Workload Identity); and, at
MSI_PATH, a managed identity's request as the metadata service (IMDS) takes it, for that same
client id (a user-assigned identity). The token is one Azurite's basic OAuth accepts (issuer
sts.windows.net, audience storage.azure.com, a lifetime; signed with a key of its own, which
Azurite does not check). Anything else gets Azure AD's 400. Every request's form (or query) is
kept, secrets included, for the test to look at.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

SCOPE = "https://storage.azure.com/.default"
ASSERTION = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
MSI_PATH = "/metadata/identity/oauth2/token"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class TokenEndpoint:
    def __init__(self, tenant: str, client_id: str, assertion: str = "", secret: str = "") -> None:
        self.tenant, self.client_id = tenant, client_id
        self.assertion, self.secret = assertion, secret
        self.requests: list[dict[str, str]] = []
        self._key = secrets.token_bytes(32)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> TokenEndpoint:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def token(self) -> str:
        now = int(time.time())
        claims = {
            "aud": "https://storage.azure.com",
            "iss": f"https://sts.windows.net/{self.tenant}/",
            "iat": now - 60,
            "nbf": now - 60,
            "exp": now + 3600,
            "appid": self.client_id,
            "tid": self.tenant,
        }
        head = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
        body = _b64(json.dumps(claims).encode())
        mac = hmac.new(self._key, f"{head}.{body}".encode(), hashlib.sha256).digest()
        return f"{head}.{body}.{_b64(mac)}"

    def answer(self, path: str, form: dict[str, str]) -> tuple[int, dict[str, Any]]:
        self.requests.append(form)
        known = (
            path == f"/{self.tenant}/oauth2/v2.0/token"
            and form.get("grant_type") == "client_credentials"
            and form.get("client_id") == self.client_id
            and form.get("scope") == SCOPE
        )
        proved = (self.secret and form.get("client_secret") == self.secret) or (
            self.assertion
            and form.get("client_assertion_type") == ASSERTION
            and form.get("client_assertion") == self.assertion
        )
        if not (known and proved):
            return 400, {"error": "invalid_client", "error_description": "AADSTS7000215"}
        return 200, {"token_type": "Bearer", "expires_in": 3599, "access_token": self.token()}

    def answer_msi(self, path: str, headers: Any) -> tuple[int, dict[str, Any]]:
        """The metadata service's answer: a GET with `Metadata: true`, storage's resource and
        the identity's client id; `expires_in` a string, as IMDS sends it."""
        url = urlsplit(path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        self.requests.append({**query, "metadata": headers.get("Metadata", "")})
        known = (
            url.path == MSI_PATH
            and headers.get("Metadata") == "true"
            and query.get("api-version") == "2019-08-01"
            and query.get("resource") == "https://storage.azure.com"
            and query.get("client_id") == self.client_id
        )
        if not known:
            return 400, {"error": "invalid_request", "error_description": "Identity not found"}
        expires = str(int(time.time()) + 3599)
        token = {"access_token": self.token(), "expires_in": "3599", "expires_on": expires}
        return 200, {**token, "resource": "https://storage.azure.com", "token_type": "Bearer"}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                fields = parse_qs(self.rfile.read(length).decode())
                form = {k: v[0] for k, v in fields.items()}
                self._send(*endpoint.answer(self.path, form))

            def do_GET(self) -> None:
                self._send(*endpoint.answer_msi(self.path, self.headers))

            def _send(self, status: int, doc: dict[str, Any]) -> None:
                data = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        return Handler
