"""HTTP/1.1 requests (the etcd gateway's JSON API)."""

from __future__ import annotations

import re

from elect_bench.relays.framer import Framer, ParseError

_TOKEN = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_REQUEST_LINE = re.compile(rb"([!#$%&'*+.^_`|~0-9A-Za-z-]+) \S+ HTTP/\d\.\d")
_HEX = re.compile(rb"[0-9A-Fa-f]+")


class HttpFramer(Framer):
    """HTTP/1.1 requests on a keep-alive connection: one per request head.

    Bodies are skipped by Content-Length or chunked transfer coding without being buffered, and the
    request is counted when its head is complete, so a long-lived chunked upload (a watch) counts once,
    when it starts. A request that switches protocols (Upgrade, CONNECT) ends the counting: what follows
    is no longer HTTP/1.1 as far as the relay can tell.
    """

    protocol = "http"
    MAX_HEAD = 64 * 1024
    MAX_LINE = 4096

    _HEAD, _BODY, _CHUNK_SIZE, _CHUNK_DATA, _TRAILER = range(5)

    def __init__(self) -> None:
        super().__init__()
        self._state = self._HEAD
        self._buf = bytearray()  # an unfinished head or line
        self._left = 0  # body (or chunk + CRLF) bytes still to skip

    def _feed(self, data: bytes) -> None:
        pos, end = 0, len(data)
        while pos < end:
            state = self._state
            if state in (self._BODY, self._CHUNK_DATA):
                take = min(self._left, end - pos)
                pos += take
                self._left -= take
                if self._left == 0:
                    self._state = self._HEAD if state == self._BODY else self._CHUNK_SIZE
                continue
            if state == self._HEAD:
                block, pos = self._until(data, pos, b"\r\n\r\n", self.MAX_HEAD)
                if block is not None:
                    self._head(block.lstrip(b"\r\n"))
            else:
                line, pos = self._until(data, pos, b"\r\n", self.MAX_LINE)
                if line is None:
                    continue
                if state == self._CHUNK_SIZE:
                    self._chunk_size(line)
                elif not line:  # the empty line after the trailers ends the request
                    self._state = self._HEAD

    def _until(self, data: bytes, pos: int, sep: bytes, limit: int) -> tuple[bytes | None, int]:
        """The bytes up to `sep` (which may straddle chunks) and the position after it, else (None, end)."""
        if not self._buf:
            idx = data.find(sep, pos, pos + limit + len(sep))
            if idx >= 0:
                return data[pos:idx], idx + len(sep)
            if len(data) - pos > limit:
                raise ParseError(f"http: no end of {sep!r} within {limit} bytes")
            self._buf += data[pos:]
            return None, len(data)
        old = len(self._buf)
        piece = data[pos:pos + limit - old + len(sep)]
        self._buf += piece
        idx = self._buf.find(sep, max(0, old - len(sep) + 1))
        if idx >= 0:
            block = bytes(self._buf[:idx])
            self._buf.clear()
            return block, pos + idx + len(sep) - old
        if len(self._buf) > limit:
            raise ParseError(f"http: no end of {sep!r} within {limit} bytes")
        return None, pos + len(piece)

    def _head(self, head: bytes) -> None:
        if not head:  # empty lines between requests are allowed
            return
        lines = head.split(b"\r\n")
        match = _REQUEST_LINE.fullmatch(lines[0])
        if match is None:
            raise ParseError(f"http: not a request line: {lines[0][:80]!r}")
        length: int | None = None
        switching = match.group(1) == b"CONNECT"
        chunked = False
        for line in lines[1:]:
            if line[:1] in (b" ", b"\t"):  # obsolete line folding continues the previous header
                continue
            name, colon, value = line.partition(b":")
            if not colon or _TOKEN.fullmatch(name) is None:
                raise ParseError(f"http: not a header line: {line[:80]!r}")
            name, value = name.lower(), value.strip()
            if name == b"content-length":
                if not value.isdigit() or (length is not None and length != int(value)):
                    raise ParseError(f"http: bad Content-Length {value[:40]!r}")
                length = int(value)
            elif name == b"transfer-encoding":
                chunked = value.lower().rsplit(b",", 1)[-1].strip() == b"chunked"
                if not chunked:
                    raise ParseError(f"http: request body of unknown length ({value[:40]!r})")
            elif name == b"upgrade":
                switching = True
        self.messages += 1
        if switching:
            raise ParseError("http: the request switches protocols; the rest is not counted")
        if chunked:
            self._state = self._CHUNK_SIZE
        elif length:
            self._state, self._left = self._BODY, length

    def _chunk_size(self, line: bytes) -> None:
        text = line.split(b";", 1)[0].strip()
        if _HEX.fullmatch(text) is None:
            raise ParseError(f"http: bad chunk size {line[:40]!r}")
        size = int(text, 16)
        if size == 0:
            self._state = self._TRAILER
        else:
            self._state, self._left = self._CHUNK_DATA, size + 2  # the data and its CRLF


