"""Core messages <-> one ``Batch`` of ``proto/raft.proto`` per peer (any groups, one direction).

Heartbeats and their responses, nearly all steady-state traffic, travel as packed columns: a node of
1000 groups sends one batch per peer per round, not 1000 messages.
"""

from __future__ import annotations

from collections.abc import Sequence

from google.protobuf.message import DecodeError  # type: ignore[import-untyped]

from raft_priority.membership import CLUSTER, Membership
from raft_priority.messages import (
    NODE,
    Conf,
    ConfNews,
    Heartbeat,
    HeartbeatResponse,
    Message,
    NodeBeat,
    NodeBeatAck,
    PreVoteRequest,
    PreVoteResponse,
    TimeoutNow,
    VoteRequest,
    VoteResponse,
)
from raft_priority.wire import raft_pb2 as pb


def encode(msgs: Sequence[Message], cluster: str, src: str, dst: str) -> pb.Batch:
    """One batch holding ``msgs`` (all from ``src`` to ``dst``, any groups)."""
    batch = pb.Batch(cluster=cluster, src=src, dst=dst)
    hb_group: list[int] = []
    hb_term: list[int] = []
    hb_sent: list[float] = []
    hb_closed: list[int] = []
    hb_len: list[int] = []
    hb_succ: list[int] = []
    hb_quiesce: list[bool] = []
    hb_cterm: list[int] = []
    hb_cindex: list[int] = []
    hb_committed: list[bool] = []
    r_group: list[int] = []
    r_term: list[int] = []
    r_echo: list[float] = []
    r_index: list[int] = []
    r_lterm: list[int] = []
    r_quiet: list[bool] = []
    r_cterm: list[int] = []
    r_cindex: list[int] = []
    for m in msgs:
        t = type(m)
        if t is Heartbeat:
            assert isinstance(m, Heartbeat)
            hb_group.append(m.group)
            hb_term.append(m.term)
            hb_sent.append(m.sent_at)
            hb_closed.append(m.transfer_closed)
            hb_len.append(len(m.succession))
            hb_succ.extend(m.succession)
            hb_quiesce.append(m.quiesce)
            hb_cterm.append(m.conf_term)
            hb_cindex.append(m.conf_index)
            hb_committed.append(m.committed)
            if m.conf is not None:
                _put_conf(batch.heartbeats.confs.add(heartbeat=len(hb_group) - 1), m.conf)
        elif t is HeartbeatResponse:
            assert isinstance(m, HeartbeatResponse)
            r_group.append(m.group)
            r_term.append(m.term)
            r_echo.append(m.echo)
            r_index.append(m.last_log_index)
            r_lterm.append(m.last_log_term)
            r_quiet.append(m.quiet)
            r_cterm.append(m.conf_term)
            r_cindex.append(m.conf_index)
        elif t is PreVoteRequest:
            assert isinstance(m, PreVoteRequest)
            batch.pre_votes.add(group=m.group, term=m.term, last_log_index=m.last_log_index,
                                last_log_term=m.last_log_term, conf_term=m.conf_term, conf_index=m.conf_index)
        elif t is PreVoteResponse:
            assert isinstance(m, PreVoteResponse)
            batch.pre_vote_responses.add(group=m.group, term=m.term, granted=m.granted)
        elif t is VoteRequest:
            assert isinstance(m, VoteRequest)
            batch.votes.add(group=m.group, term=m.term, last_log_index=m.last_log_index,
                            last_log_term=m.last_log_term, force=m.force, transfer_seq=m.transfer_seq,
                            conf_term=m.conf_term, conf_index=m.conf_index)
        elif t is VoteResponse:
            assert isinstance(m, VoteResponse)
            batch.vote_responses.add(group=m.group, term=m.term, granted=m.granted)
        elif t is TimeoutNow:
            assert isinstance(m, TimeoutNow)
            batch.timeout_nows.add(group=m.group, term=m.term, transfer_seq=m.transfer_seq, pin=m.pin)
        elif t is NodeBeat:
            assert isinstance(m, NodeBeat)
            batch.node_beats.add(sent_at=m.sent_at, incarnation=m.incarnation, digest=m.digest)
        elif t is NodeBeatAck:
            assert isinstance(m, NodeBeatAck)
            batch.node_beat_acks.add(echo=m.echo, incarnation=m.incarnation, digest=m.digest)
        elif t is ConfNews:
            assert isinstance(m, ConfNews) and m.conf is not None
            _put_conf(batch.news.add(), m.conf)
        else:
            raise TypeError(f"cannot encode {m!r}")
    if hb_group:
        h = batch.heartbeats
        h.group.extend(hb_group)
        h.term.extend(hb_term)
        h.sent_at.extend(hb_sent)
        h.transfer_closed.extend(hb_closed)
        h.succession_len.extend(hb_len)
        h.succession.extend(hb_succ)
        if any(hb_quiesce):  # the column is left out when no heartbeat asks (what a node without quiescence sends)
            h.quiesce.extend(hb_quiesce)
        h.conf_term.extend(hb_cterm)
        h.conf_index.extend(hb_cindex)
        if any(hb_committed):
            h.committed.extend(hb_committed)
    if r_group:
        r = batch.heartbeat_responses
        r.group.extend(r_group)
        r.term.extend(r_term)
        r.echo.extend(r_echo)
        r.last_log_index.extend(r_index)
        r.last_log_term.extend(r_lterm)
        if any(r_quiet):
            r.quiet.extend(r_quiet)
        r.conf_term.extend(r_cterm)
        r.conf_index.extend(r_cindex)
    return batch


def _put_conf(out: pb.ConfEntry, conf: Conf) -> None:
    out.term, out.index = conf.term, conf.index
    out.voter.extend(conf.voters)
    out.priority.extend(conf.voters.values())
    if conf.old is not None:
        out.joint = True
        out.old.extend(conf.old)
        out.old_priority.extend(conf.old.values())
    out.learner.extend(conf.learners)
    if conf.payload is not None:
        assert isinstance(conf.payload, Membership)
        out.payload = conf.payload.to_json().encode()


def _get_conf(c: pb.ConfEntry) -> Conf:
    payload = Membership.from_json(c.payload) if c.payload else None
    old = dict(zip(c.old, c.old_priority, strict=True)) if c.joint else None
    return Conf(c.term, c.index, dict(zip(c.voter, c.priority, strict=True)), old, tuple(c.learner), payload)


class MalformedBatch(ValueError):
    """Bytes that are not a batch `encode` could have written: not protobuf, or packed columns of different
    lengths. Anyone who reaches a node's port can send them, so they are dropped, never fatal."""


def parse(data: bytes) -> pb.Batch:
    """One serialized batch, as received; MalformedBatch if `data` is not a `Batch` in protobuf."""
    batch = pb.Batch()
    try:
        batch.ParseFromString(data)
    except DecodeError as exc:
        raise MalformedBatch(f"{len(data)} bytes that are not a batch: {exc}") from None
    return batch


def decode(batch: pb.Batch) -> list[Message]:
    """The core messages of one batch, in a fixed order: heartbeat traffic first, then elections, then the node
    links' (`raft_priority.host` relies on that last).

    Raises MalformedBatch, and yields nothing of the batch, when its packed columns disagree: a batch is decoded
    whole or not at all.
    """
    try:
        return _decode(batch)
    except ValueError as exc:  # zip(strict=True): one column shorter than the others
        raise MalformedBatch(f"malformed batch from {batch.src!r}: {exc}") from None


def _decode(batch: pb.Batch) -> list[Message]:
    src, dst = batch.src, batch.dst
    out: list[Message] = []
    if batch.HasField("heartbeats"):
        h = batch.heartbeats
        succ = list(h.succession)
        if sum(h.succession_len) != len(succ):
            raise ValueError(f"succession_len adds up to {sum(h.succession_len)}, succession has {len(succ)}")
        pos = 0
        count = len(h.group)
        quiesce = list(h.quiesce) or [False] * count
        cterm = list(h.conf_term) or [0] * count  # a node of an earlier version sends no positions
        cindex = list(h.conf_index) or [0] * count
        committed = list(h.committed) or [False] * count
        confs: dict[int, Conf] = {}
        for c in h.confs:
            if c.heartbeat >= count:
                raise ValueError(f"a configuration for heartbeat {c.heartbeat} of {count}")
            confs[c.heartbeat] = _get_conf(c)
        for k, (g, t, s, c, n, q, ct, ci, cm) in enumerate(zip(h.group, h.term, h.sent_at, h.transfer_closed,
                                                                h.succession_len, quiesce, cterm, cindex, committed,
                                                                strict=True)):
            out.append(Heartbeat(g, src, dst, t, s, tuple(succ[pos:pos + n]) if n else (), c, q, ct, ci, cm,
                                 confs.get(k)))
            pos += n
    if batch.HasField("heartbeat_responses"):
        r = batch.heartbeat_responses
        quiet = list(r.quiet) or [False] * len(r.group)
        rterm = list(r.conf_term) or [0] * len(r.group)
        rindex = list(r.conf_index) or [0] * len(r.group)
        for g, t, e, i, lt, q, ct, ci in zip(r.group, r.term, r.echo, r.last_log_index, r.last_log_term, quiet,
                                             rterm, rindex, strict=True):
            out.append(HeartbeatResponse(g, src, dst, t, e, i, lt, q, ct, ci))
    for p in batch.pre_votes:
        out.append(PreVoteRequest(p.group, src, dst, p.term, p.last_log_index, p.last_log_term, p.conf_term,
                                  p.conf_index))
    for q in batch.pre_vote_responses:
        out.append(PreVoteResponse(q.group, src, dst, q.term, q.granted))
    for v in batch.votes:
        out.append(VoteRequest(v.group, src, dst, v.term, v.last_log_index, v.last_log_term, v.force, v.transfer_seq,
                               v.conf_term, v.conf_index))
    for w in batch.vote_responses:
        out.append(VoteResponse(w.group, src, dst, w.term, w.granted))
    for x in batch.timeout_nows:
        out.append(TimeoutNow(x.group, src, dst, x.term, x.transfer_seq, x.pin))
    for b in batch.node_beats:
        out.append(NodeBeat(NODE, src, dst, 0, b.sent_at, b.incarnation, b.digest))
    for a in batch.node_beat_acks:
        out.append(NodeBeatAck(NODE, src, dst, 0, a.echo, a.incarnation, a.digest))
    for c in batch.news:
        out.append(ConfNews(CLUSTER, src, dst, 0, _get_conf(c)))
    return out
