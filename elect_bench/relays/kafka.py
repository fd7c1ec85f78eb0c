"""Kafka's requests: length-prefixed frames whose first header names the client."""

from __future__ import annotations

from elect_bench.relays.framer import LengthPrefixed, ParseError


class KafkaFramer(LengthPrefixed):
    """Kafka: every frame is one request; the first one's header names the client (``client.id``).

    A broker advertises one address, so one relay serves every member and the client id tells them apart.
    Each request's api_key and api_version are checked for sign, which catches most non-Kafka streams early.
    """

    protocol = "kafka"
    min_payload = 8  # api_key, api_version, correlation_id

    def __init__(self) -> None:
        super().__init__()
        self.client_id: str | None = None
        self.client_id_known = False  # the first request's header has been read
        self._head = bytearray()
        self._want = 0  # header bytes of the current frame to collect
        self._stage = 0  # 0: api_key and version, 1: client_id's length, 2: client_id
        self._frame_length = 0

    def _start_frame(self, length: int) -> None:
        self._head.clear()
        self._frame_length = length
        self._stage, self._want = 0, 4

    def _payload(self, data: bytes, start: int, stop: int) -> None:
        while start < stop and len(self._head) < self._want:
            take = min(stop - start, self._want - len(self._head))
            self._head += data[start:start + take]
            start += take
            if len(self._head) == self._want:
                self._header_part()

    def _header_part(self) -> None:
        """The next field of the request header is complete: check it, and decide what else to read."""
        head = self._head
        if self._stage == 0:
            api_key = int.from_bytes(head[0:2], "big", signed=True)
            api_version = int.from_bytes(head[2:4], "big", signed=True)
            if api_key < 0 or api_version < 0:
                raise ParseError(f"kafka: implausible request header (api_key {api_key}, version {api_version})")
            if not self.client_id_known:
                self._stage, self._want = 1, 10  # correlation_id, then the client_id's length
        elif self._stage == 1:
            size = int.from_bytes(head[8:10], "big", signed=True)
            if size < -1 or 10 + size > self._frame_length:
                raise ParseError(f"kafka: implausible client_id length {size}")
            if size <= 0:
                self._identified(None if size == -1 else "")
            else:
                self._stage, self._want = 2, 10 + size
        else:
            self._identified(bytes(head[10:]).decode("utf-8", "replace"))

    def _identified(self, client_id: str | None) -> None:
        self.client_id = client_id
        self.client_id_known = True

    def _end_frame(self) -> None:
        if not self.client_id_known:  # a first frame too short to carry a client_id (header v0)
            self._identified(None)
        super()._end_frame()


