# ruff: noqa
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Heartbeats(_message.Message):
    __slots__ = ("group", "term", "sent_at", "transfer_closed", "succession_len", "succession", "quiesce", "conf_term", "conf_index", "committed", "confs")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    SENT_AT_FIELD_NUMBER: _ClassVar[int]
    TRANSFER_CLOSED_FIELD_NUMBER: _ClassVar[int]
    SUCCESSION_LEN_FIELD_NUMBER: _ClassVar[int]
    SUCCESSION_FIELD_NUMBER: _ClassVar[int]
    QUIESCE_FIELD_NUMBER: _ClassVar[int]
    CONF_TERM_FIELD_NUMBER: _ClassVar[int]
    CONF_INDEX_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_FIELD_NUMBER: _ClassVar[int]
    CONFS_FIELD_NUMBER: _ClassVar[int]
    group: _containers.RepeatedScalarFieldContainer[int]
    term: _containers.RepeatedScalarFieldContainer[int]
    sent_at: _containers.RepeatedScalarFieldContainer[float]
    transfer_closed: _containers.RepeatedScalarFieldContainer[int]
    succession_len: _containers.RepeatedScalarFieldContainer[int]
    succession: _containers.RepeatedScalarFieldContainer[int]
    quiesce: _containers.RepeatedScalarFieldContainer[bool]
    conf_term: _containers.RepeatedScalarFieldContainer[int]
    conf_index: _containers.RepeatedScalarFieldContainer[int]
    committed: _containers.RepeatedScalarFieldContainer[bool]
    confs: _containers.RepeatedCompositeFieldContainer[ConfEntry]
    def __init__(self, group: _Optional[_Iterable[int]] = ..., term: _Optional[_Iterable[int]] = ..., sent_at: _Optional[_Iterable[float]] = ..., transfer_closed: _Optional[_Iterable[int]] = ..., succession_len: _Optional[_Iterable[int]] = ..., succession: _Optional[_Iterable[int]] = ..., quiesce: _Optional[_Iterable[bool]] = ..., conf_term: _Optional[_Iterable[int]] = ..., conf_index: _Optional[_Iterable[int]] = ..., committed: _Optional[_Iterable[bool]] = ..., confs: _Optional[_Iterable[_Union[ConfEntry, _Mapping]]] = ...) -> None: ...

class ConfEntry(_message.Message):
    __slots__ = ("heartbeat", "term", "index", "voter", "priority", "joint", "old", "old_priority", "learner", "payload")
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    VOTER_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    JOINT_FIELD_NUMBER: _ClassVar[int]
    OLD_FIELD_NUMBER: _ClassVar[int]
    OLD_PRIORITY_FIELD_NUMBER: _ClassVar[int]
    LEARNER_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    heartbeat: int
    term: int
    index: int
    voter: _containers.RepeatedScalarFieldContainer[str]
    priority: _containers.RepeatedScalarFieldContainer[int]
    joint: bool
    old: _containers.RepeatedScalarFieldContainer[str]
    old_priority: _containers.RepeatedScalarFieldContainer[int]
    learner: _containers.RepeatedScalarFieldContainer[str]
    payload: bytes
    def __init__(self, heartbeat: _Optional[int] = ..., term: _Optional[int] = ..., index: _Optional[int] = ..., voter: _Optional[_Iterable[str]] = ..., priority: _Optional[_Iterable[int]] = ..., joint: _Optional[bool] = ..., old: _Optional[_Iterable[str]] = ..., old_priority: _Optional[_Iterable[int]] = ..., learner: _Optional[_Iterable[str]] = ..., payload: _Optional[bytes] = ...) -> None: ...

class HeartbeatResponses(_message.Message):
    __slots__ = ("group", "term", "echo", "last_log_index", "last_log_term", "quiet", "conf_term", "conf_index")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    ECHO_FIELD_NUMBER: _ClassVar[int]
    LAST_LOG_INDEX_FIELD_NUMBER: _ClassVar[int]
    LAST_LOG_TERM_FIELD_NUMBER: _ClassVar[int]
    QUIET_FIELD_NUMBER: _ClassVar[int]
    CONF_TERM_FIELD_NUMBER: _ClassVar[int]
    CONF_INDEX_FIELD_NUMBER: _ClassVar[int]
    group: _containers.RepeatedScalarFieldContainer[int]
    term: _containers.RepeatedScalarFieldContainer[int]
    echo: _containers.RepeatedScalarFieldContainer[float]
    last_log_index: _containers.RepeatedScalarFieldContainer[int]
    last_log_term: _containers.RepeatedScalarFieldContainer[int]
    quiet: _containers.RepeatedScalarFieldContainer[bool]
    conf_term: _containers.RepeatedScalarFieldContainer[int]
    conf_index: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, group: _Optional[_Iterable[int]] = ..., term: _Optional[_Iterable[int]] = ..., echo: _Optional[_Iterable[float]] = ..., last_log_index: _Optional[_Iterable[int]] = ..., last_log_term: _Optional[_Iterable[int]] = ..., quiet: _Optional[_Iterable[bool]] = ..., conf_term: _Optional[_Iterable[int]] = ..., conf_index: _Optional[_Iterable[int]] = ...) -> None: ...

class PreVoteRequest(_message.Message):
    __slots__ = ("group", "term", "last_log_index", "last_log_term", "conf_term", "conf_index")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    LAST_LOG_INDEX_FIELD_NUMBER: _ClassVar[int]
    LAST_LOG_TERM_FIELD_NUMBER: _ClassVar[int]
    CONF_TERM_FIELD_NUMBER: _ClassVar[int]
    CONF_INDEX_FIELD_NUMBER: _ClassVar[int]
    group: int
    term: int
    last_log_index: int
    last_log_term: int
    conf_term: int
    conf_index: int
    def __init__(self, group: _Optional[int] = ..., term: _Optional[int] = ..., last_log_index: _Optional[int] = ..., last_log_term: _Optional[int] = ..., conf_term: _Optional[int] = ..., conf_index: _Optional[int] = ...) -> None: ...

class PreVoteResponse(_message.Message):
    __slots__ = ("group", "term", "granted")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    GRANTED_FIELD_NUMBER: _ClassVar[int]
    group: int
    term: int
    granted: bool
    def __init__(self, group: _Optional[int] = ..., term: _Optional[int] = ..., granted: _Optional[bool] = ...) -> None: ...

class VoteRequest(_message.Message):
    __slots__ = ("group", "term", "last_log_index", "last_log_term", "force", "transfer_seq", "conf_term", "conf_index")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    LAST_LOG_INDEX_FIELD_NUMBER: _ClassVar[int]
    LAST_LOG_TERM_FIELD_NUMBER: _ClassVar[int]
    FORCE_FIELD_NUMBER: _ClassVar[int]
    TRANSFER_SEQ_FIELD_NUMBER: _ClassVar[int]
    CONF_TERM_FIELD_NUMBER: _ClassVar[int]
    CONF_INDEX_FIELD_NUMBER: _ClassVar[int]
    group: int
    term: int
    last_log_index: int
    last_log_term: int
    force: bool
    transfer_seq: int
    conf_term: int
    conf_index: int
    def __init__(self, group: _Optional[int] = ..., term: _Optional[int] = ..., last_log_index: _Optional[int] = ..., last_log_term: _Optional[int] = ..., force: _Optional[bool] = ..., transfer_seq: _Optional[int] = ..., conf_term: _Optional[int] = ..., conf_index: _Optional[int] = ...) -> None: ...

class VoteResponse(_message.Message):
    __slots__ = ("group", "term", "granted")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    GRANTED_FIELD_NUMBER: _ClassVar[int]
    group: int
    term: int
    granted: bool
    def __init__(self, group: _Optional[int] = ..., term: _Optional[int] = ..., granted: _Optional[bool] = ...) -> None: ...

class NodeBeat(_message.Message):
    __slots__ = ("sent_at", "incarnation", "digest")
    SENT_AT_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_FIELD_NUMBER: _ClassVar[int]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    sent_at: float
    incarnation: int
    digest: int
    def __init__(self, sent_at: _Optional[float] = ..., incarnation: _Optional[int] = ..., digest: _Optional[int] = ...) -> None: ...

class NodeBeatAck(_message.Message):
    __slots__ = ("echo", "incarnation", "digest")
    ECHO_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_FIELD_NUMBER: _ClassVar[int]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    echo: float
    incarnation: int
    digest: int
    def __init__(self, echo: _Optional[float] = ..., incarnation: _Optional[int] = ..., digest: _Optional[int] = ...) -> None: ...

class TimeoutNow(_message.Message):
    __slots__ = ("group", "term", "transfer_seq", "pin")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    TRANSFER_SEQ_FIELD_NUMBER: _ClassVar[int]
    PIN_FIELD_NUMBER: _ClassVar[int]
    group: int
    term: int
    transfer_seq: int
    pin: bool
    def __init__(self, group: _Optional[int] = ..., term: _Optional[int] = ..., transfer_seq: _Optional[int] = ..., pin: _Optional[bool] = ...) -> None: ...

class Batch(_message.Message):
    __slots__ = ("cluster", "src", "dst", "heartbeats", "heartbeat_responses", "pre_votes", "pre_vote_responses", "votes", "vote_responses", "timeout_nows", "node_beats", "node_beat_acks", "news")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    SRC_FIELD_NUMBER: _ClassVar[int]
    DST_FIELD_NUMBER: _ClassVar[int]
    HEARTBEATS_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_RESPONSES_FIELD_NUMBER: _ClassVar[int]
    PRE_VOTES_FIELD_NUMBER: _ClassVar[int]
    PRE_VOTE_RESPONSES_FIELD_NUMBER: _ClassVar[int]
    VOTES_FIELD_NUMBER: _ClassVar[int]
    VOTE_RESPONSES_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_NOWS_FIELD_NUMBER: _ClassVar[int]
    NODE_BEATS_FIELD_NUMBER: _ClassVar[int]
    NODE_BEAT_ACKS_FIELD_NUMBER: _ClassVar[int]
    NEWS_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    src: str
    dst: str
    heartbeats: Heartbeats
    heartbeat_responses: HeartbeatResponses
    pre_votes: _containers.RepeatedCompositeFieldContainer[PreVoteRequest]
    pre_vote_responses: _containers.RepeatedCompositeFieldContainer[PreVoteResponse]
    votes: _containers.RepeatedCompositeFieldContainer[VoteRequest]
    vote_responses: _containers.RepeatedCompositeFieldContainer[VoteResponse]
    timeout_nows: _containers.RepeatedCompositeFieldContainer[TimeoutNow]
    node_beats: _containers.RepeatedCompositeFieldContainer[NodeBeat]
    node_beat_acks: _containers.RepeatedCompositeFieldContainer[NodeBeatAck]
    news: _containers.RepeatedCompositeFieldContainer[ConfEntry]
    def __init__(self, cluster: _Optional[str] = ..., src: _Optional[str] = ..., dst: _Optional[str] = ..., heartbeats: _Optional[_Union[Heartbeats, _Mapping]] = ..., heartbeat_responses: _Optional[_Union[HeartbeatResponses, _Mapping]] = ..., pre_votes: _Optional[_Iterable[_Union[PreVoteRequest, _Mapping]]] = ..., pre_vote_responses: _Optional[_Iterable[_Union[PreVoteResponse, _Mapping]]] = ..., votes: _Optional[_Iterable[_Union[VoteRequest, _Mapping]]] = ..., vote_responses: _Optional[_Iterable[_Union[VoteResponse, _Mapping]]] = ..., timeout_nows: _Optional[_Iterable[_Union[TimeoutNow, _Mapping]]] = ..., node_beats: _Optional[_Iterable[_Union[NodeBeat, _Mapping]]] = ..., node_beat_acks: _Optional[_Iterable[_Union[NodeBeatAck, _Mapping]]] = ..., news: _Optional[_Iterable[_Union[ConfEntry, _Mapping]]] = ...) -> None: ...

class Ack(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
