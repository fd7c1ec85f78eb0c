"""gRPC messages over cleartext HTTP/2 (the Raft members' transport)."""

from __future__ import annotations

from elect_bench.relays.framer import MAX_MESSAGE, Framer, ParseError

_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_DATA, _HEADERS, _RST_STREAM = 0x0, 0x1, 0x3
_END_STREAM, _PADDED = 0x1, 0x8


class _GrpcStream:
    """gRPC length-prefixed messages (compressed flag, 4-byte length, message) of one HTTP/2 stream."""

    __slots__ = ("left", "prefix")

    def __init__(self) -> None:
        self.prefix = bytearray()
        self.left = 0  # message bytes still to come; 0 while reading a prefix

    def feed(self, data: bytes, pos: int, end: int) -> int:
        done = 0
        while pos < end:
            if self.left:
                take = min(self.left, end - pos)
                pos += take
                self.left -= take
                done += self.left == 0
                continue
            take = min(5 - len(self.prefix), end - pos)
            self.prefix += data[pos:pos + take]
            pos += take
            if len(self.prefix) < 5:
                break
            flag, length = self.prefix[0], int.from_bytes(self.prefix[1:5], "big")
            self.prefix.clear()
            if flag > 1 or length > MAX_MESSAGE:
                raise ParseError(f"grpc: implausible message prefix (flag {flag}, length {length})")
            if length == 0:
                done += 1
            else:
                self.left = length
        return done


class GrpcFramer(Framer):
    """gRPC over cleartext HTTP/2 with prior knowledge: counts the messages clients send on every stream.

    DATA frames are reassembled per stream (padding stripped); all other frames are skipped unread.
    """

    protocol = "grpc"

    def __init__(self) -> None:
        super().__init__()
        self._preface = 0  # preface bytes checked so far
        self._header = bytearray()  # a frame header split across chunks
        self._left = 0  # payload bytes of the current frame still to come
        self._in_frame = False
        self._stream_id = 0
        self._flags = 0
        self._type = 0
        self._stream: _GrpcStream | None = None  # set while in a DATA frame
        self._pad_pending = False  # the pad length byte is still to come
        self._data_left = 0  # message bytes (not padding) left in the current DATA frame
        self._streams: dict[int, _GrpcStream] = {}

    def _feed(self, data: bytes) -> None:
        pos, end = 0, len(data)
        if self._preface < len(_PREFACE):
            take = min(len(_PREFACE) - self._preface, end)
            if data[:take] != _PREFACE[self._preface:self._preface + take]:
                raise ParseError("grpc: no HTTP/2 client preface (TLS or HTTP/1.1?)")
            self._preface += take
            pos = take
        while pos < end:
            if self._in_frame:
                take = min(self._left, end - pos)
                if self._stream is not None:
                    self._data(data, pos, pos + take)
                pos += take
                self._left -= take
                if self._left == 0:
                    self._end_frame()
                continue
            need = 9 - len(self._header)
            self._header += data[pos:pos + need]
            pos += min(need, end - pos)
            if len(self._header) == 9:
                self._start_frame()

    def _start_frame(self) -> None:
        header = self._header
        self._left = int.from_bytes(header[0:3], "big")
        self._type, self._flags = header[3], header[4]
        self._stream_id = int.from_bytes(header[5:9], "big") & 0x7FFFFFFF
        header.clear()
        self._in_frame = True
        self._stream = None
        if self._type == _DATA:
            if self._stream_id == 0:
                raise ParseError("grpc: DATA frame on stream 0")
            self._pad_pending = bool(self._flags & _PADDED)
            if self._pad_pending and self._left == 0:
                raise ParseError("grpc: padded DATA frame without a pad length")
            self._data_left = self._left - self._pad_pending
            self._stream = self._streams.setdefault(self._stream_id, _GrpcStream())
        elif self._type == _RST_STREAM:
            self._streams.pop(self._stream_id, None)
        if self._left == 0:
            self._end_frame()

    def _data(self, data: bytes, pos: int, end: int) -> None:
        assert self._stream is not None
        if self._pad_pending and pos < end:
            pad = data[pos]
            pos += 1
            self._pad_pending = False
            if pad > self._data_left:
                raise ParseError(f"grpc: pad length {pad} exceeds the DATA frame")
            self._data_left -= pad
        take = min(self._data_left, end - pos)
        if take:
            self._data_left -= take
            self.messages += self._stream.feed(data, pos, pos + take)

    def _end_frame(self) -> None:
        self._in_frame = False
        self._stream = None
        if self._type in (_DATA, _HEADERS) and self._flags & _END_STREAM:
            self._streams.pop(self._stream_id, None)


