"""Requests no HTTP client library would send, for the robustness probes of ``probe_service.py``: bytes
sent as written (``..`` kept, a lying Content-Length) and PNG headers that claim any size."""

from __future__ import annotations

import http.client
import struct
import zlib

from probe_service_common import Ctx


def raw(
    ctx: Ctx, method: str, path: str, headers: dict[str, str] | None = None, body: bytes = b""
) -> tuple[int, bytes]:
    """A request sent as written (http.client does not normalise ``..`` nor fix Content-Length)."""
    con = http.client.HTTPConnection("127.0.0.1", ctx.server.port, timeout=60)
    try:
        con.putrequest(method, path, skip_accept_encoding=True)
        headers = dict(headers or {})
        if body and not any(name.lower() == "content-length" for name in headers):
            headers["Content-Length"] = str(len(body))
        for name, value in headers.items():
            con.putheader(name, value)
        con.endheaders(body or None)
        response = con.getresponse()
        return response.status, response.read()
    finally:
        con.close()


def png_header(width: int, height: int) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(b"\x00" * 16))
        + chunk(b"IEND", b"")
    )
