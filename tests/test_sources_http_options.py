"""Bearer token and TLS options of a Prometheus source, against a small HTTPS server on
127.0.0.1 that answers /api/v1/query like Prometheus and records the request headers."""

from __future__ import annotations

import asyncio
import json
import shutil
import ssl
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from scorer.sources import NodeMappingArgs, SourceArgs, SourceHub
from scorer.testing import make_node

VECTOR = {"status": "success", "data": {"resultType": "vector", "result": [
    {"metric": {"node": "n1"}, "value": [1700000000.0, "42"]}]}}


class _Handler(BaseHTTPRequestHandler):
    seen: list[dict[str, str]] = []

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        _Handler.seen.append(dict(self.headers))
        if self.headers.get("Authorization") != "Bearer s3cret":
            self.send_response(401)
            self.end_headers()
            self.wfile.write(b'{"status":"error","error":"unauthorized"}')
            return
        body = json.dumps(VECTOR).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def https_server(tmp_path):
    if shutil.which("openssl") is None:
        pytest.skip("openssl not installed (needed to make a test certificate)")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                    "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key),
                    "-out", str(cert)], check=True, capture_output=True, timeout=60)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(cert), str(key))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    _Handler.seen = []
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}", cert
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _fetch(url: str, **source: object):
    hub = SourceHub(lambda: [make_node("n1")])
    args = SourceArgs(node_mapping=NodeMappingArgs(by="label", label="node"), **source)
    prom = hub.source(plugin="P", metric="m", address=url, query="m", source_args=args)
    return asyncio.run(prom.refresh())


def test_ca_file_and_bearer_token(https_server, tmp_path):
    url, cert = https_server
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    data = _fetch(url, ca_file=str(cert), bearer_token_file=str(token))
    assert data.healthy and data.values == {"n1": 42.0}
    assert _Handler.seen[-1]["Authorization"] == "Bearer s3cret"
    token.write_text("rotated")  # re-read on every query
    data = _fetch(url, ca_file=str(cert), bearer_token_file=str(token))
    assert data.last_error_kind == "auth" and "HTTP 401" in data.last_error


@pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")
def test_unknown_certificate_is_a_tls_error_unless_skipped(https_server, tmp_path):
    url, _ = https_server
    token = tmp_path / "token"
    token.write_text("s3cret")
    data = _fetch(url, bearer_token_file=str(token))
    assert data.warming_up and data.last_error_kind == "tls"
    data = _fetch(url, bearer_token_file=str(token), insecure_skip_verify=True)
    assert data.healthy and data.values == {"n1": 42.0}
