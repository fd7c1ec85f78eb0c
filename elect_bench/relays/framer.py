"""What every framer is: an incremental counter of the messages in one client->server byte stream."""

from __future__ import annotations

from typing import ClassVar

#: A length above this is taken for garbage, not a message: no protocol here sends 256 MiB at once.
MAX_MESSAGE = 256 * 1024 * 1024


class ParseError(Exception):
    """The stream is not the protocol the relay was told to expect."""


class Framer:
    """Counts the messages in one client->server byte stream, fed in chunks of any size.

    ``feed`` never raises: a stream that does not parse sets ``error`` and is ignored from then on,
    because the relay must keep forwarding it whatever it is.
    """

    protocol: ClassVar[str] = ""

    def __init__(self) -> None:
        self.error: str | None = None
        self.messages = 0  # finished so far

    def feed(self, data: bytes | bytearray | memoryview) -> int:
        """Parse the next bytes of the stream; return how many messages they finished."""
        if self.error is not None or not data:
            return 0
        before = self.messages
        try:
            self._feed(bytes(data))
        except ParseError as exc:
            self.error = str(exc)
        except Exception as exc:  # a framer bug must cost the count, never the traffic
            self.error = f"framer failed: {exc!r}"
        return self.messages - before

    def _feed(self, data: bytes) -> None:
        raise NotImplementedError


class LengthPrefixed(Framer):
    """Frames of a 4-byte big-endian length and a payload; subclasses may look at the payload."""

    min_payload: ClassVar[int] = 0

    def __init__(self) -> None:
        super().__init__()
        self._size = bytearray()  # a length prefix split across chunks
        self._left = 0  # payload bytes of the current frame still to come
        self._in_frame = False

    def _feed(self, data: bytes) -> None:
        pos, end = 0, len(data)
        while pos < end:
            if self._in_frame:
                take = min(self._left, end - pos)
                self._payload(data, pos, pos + take)
                pos += take
                self._left -= take
                if self._left == 0:
                    self._end_frame()
                continue
            need = 4 - len(self._size)
            self._size += data[pos:pos + need]
            pos += min(need, end - pos)
            if len(self._size) < 4:
                return
            length = int.from_bytes(self._size, "big", signed=True)
            self._size.clear()
            if not self.min_payload <= length <= MAX_MESSAGE:
                raise ParseError(f"{self.protocol}: implausible frame length {length}")
            self._left = length
            self._in_frame = True
            self._start_frame(length)
            if length == 0:
                self._end_frame()

    def _start_frame(self, length: int) -> None:
        """A frame of `length` payload bytes begins."""

    def _payload(self, data: bytes, start: int, stop: int) -> None:
        """`data[start:stop]` is the next piece of the current frame's payload."""

    def _end_frame(self) -> None:
        self._in_frame = False
        self.messages += 1


