"""`pysyncobj://`: the baseline built on PySyncObj, an independent Raft library (one SyncObj per partition).

    pysyncobj://a@127.0.0.1:7101?peers=b@127.0.0.1:7201,c@127.0.0.1:7301&partitions=6&election_timeout=1.0

Partition p of a node listens on PORT + p. Leadership is read by polling ``_isLeader()`` every
``poll_interval``; the token is the SyncObj's ``raftCurrentTerm``. Each partition's term and vote are kept in
PySyncObj's own file journal (``journalFile``), under ``data_dir`` (kept across restarts of the member) or
else a temporary directory for the life of the process: the baseline shuts a partition's SyncObj down on
every resign and starts a new one, and a new one that forgot whom it voted for could vote twice in a term,
electing two leaders, one after the other, under the same term (the same token; seen in the suite). PySyncObj
writes that term and vote to `.meta` without fsync (its MetaStorer flushes and renames, never syncs), so a crash
of the machine, unlike one of the process, can still lose a vote; and it reads a damaged `.meta` as empty, which
the baseline refuses instead (`_check_journal`).

What it does not promise (its characteristics say so): PySyncObj has no leader lease and no
PreVote, so a cut-off leader keeps believing it leads until ``leaderFallbackTimeout`` passes while
the others may already have elected a successor: leadership is *not* exclusive under partitions.
There is no leadership transfer: ``stop()``/``resign()`` publish Revoked, wait for the callbacks (the old
leader keeps heartbeating meanwhile, which holds any successor back), then shut that partition's SyncObj down,
so the others elect after an election timeout; a resigned partition rejoins after ``rejoin_delay``. A node
that contends for no role on a partition only votes there (it never campaigns: a node that won such a
partition and stepped aside came back with a fresh term 0 and raised it, campaign after campaign, until it
unseated the leader); should it win one anyway, it steps aside the same way for ET/2. A node that resigned a
partition rejoins it after ET/2 as a voter that never campaigns (its election timeout set out of reach) until
it has seen another node lead it (or, when nobody else contends, for 10 ET at most): the others may need its
vote (a two-node group has no majority without it), and a resigner that campaigned while they were still
electing could simply win its role back.
"""

from __future__ import annotations

import logging
import random
import shutil
import tempfile
import threading
import time
from pathlib import Path

from pysyncobj import SyncObj, SyncObjConf
from pysyncobj.journal import createJournal
from pysyncobj.journal import loads as journal_loads
from pysyncobj.monotonic import monotonic

from elect.base import BaseElector
from elect.contract import Characteristics
from elect.errors import StateUnreadable
from elect.roles import Role, partition_of
from elect_bench.baselines.pysyncobj_plugin import PySyncObjOptions
from raft_priority.options import split_host_port

log = logging.getLogger("elect.pysyncobj")
logging.getLogger("pysyncobj").setLevel(logging.CRITICAL)  # it logs every refused connection


def _check_journal(path: str) -> None:
    """Refuse a journal PySyncObj cannot read back: `StateUnreadable`, naming the file, since starting afresh could
    vote twice. Its log fails deep in SyncObj's constructor with a traceback (the partition's threads half started);
    its `.meta`, which holds the term and the vote, PySyncObj reads as empty whatever is wrong with it (its
    MetaStorer swallows every error): a node with a damaged one would start at term 0 with no vote."""
    meta = Path(path + ".meta")
    if not (Path(path).exists() or meta.exists()):
        return
    journal = None
    try:
        data = meta.read_bytes() if meta.exists() else b""
        if data and not isinstance(journal_loads(data), dict):
            raise TypeError(f"{meta} holds no mapping of term and vote")
        journal = createJournal(path)
        journal.getCurrentTerm()
        journal.getVotedForNodeId()
    except Exception as exc:  # whatever PySyncObj raises on bytes it did not write (struct.error, pickle, EOF...)
        raise StateUnreadable(f"PySyncObj journal {path} (or its .meta) is damaged ({type(exc).__name__}: {exc}): "
                              "starting on what can be read could vote twice in one term; restore it, or remove "
                              "the member's data and start it as a new member") from None
    finally:
        if journal is not None:
            journal._destroy()


def _shift(address: str, offset: int) -> str:
    where = split_host_port(address)
    assert where is not None
    return f"{where[0]}:{where[1] + offset}"


class PySyncObjElector(BaseElector):
    """One node of a pysyncobj:// cluster."""

    scheme = "pysyncobj"
    unobservable = ("the baseline asks PySyncObj only whether this node leads each partition (`_isLeader()`), "
                    "and a partition it resigned is shut down until it rejoins; it is kept as PySyncObj's own "
                    "behaviour for comparison, not extended")
    untransferable = "PySyncObj has no leadership transfer to a named node; the baseline is not extended"

    def __init__(self, options: PySyncObjOptions, member: str, roles: tuple[Role, ...]) -> None:
        options.check_member(member)
        super().__init__(member, roles)
        self.options = options
        self.revoke_timeout = options.revoke_timeout
        self._objs: dict[int, SyncObj] = {}
        self._rejoin_at: dict[int, float] = {}
        self._resigned: dict[int, float] = {}  # partition -> until when this node votes without campaigning
        self._confs: dict[int, SyncObjConf] = {}  # each SyncObj's conf (PySyncObj reads its timeouts live)
        self._leading: dict[int, int] = {}  # partition -> term this node leads it in
        self._objs_lock = threading.RLock()
        self._stop = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._journals: Path | None = None  # where each partition's term and vote are kept (see the module)

    @property
    def characteristics(self) -> Characteristics:
        et = self.options.election_timeout
        return Characteristics(exclusive=False, max_overlap=None, max_failover=round(3 * et + self.options.poll, 3),
                               graceful_handover=True, token="PySyncObj raft term (its file journal)")

    # ------------------------------------------------------------------ lifecycle

    def _conf(self) -> SyncObjConf:
        o = self.options
        return SyncObjConf(
            raftMinTimeout=o.election_timeout,
            raftMaxTimeout=2 * o.election_timeout,
            appendEntriesPeriod=o.heartbeat,
            leaderFallbackTimeout=o.fallback,
            autoTickPeriod=min(0.05, o.heartbeat / 2),
            connectionTimeout=2 * o.election_timeout,  # PySyncObj requires >= raftMaxTimeout
            connectionRetryTime=max(0.2, o.election_timeout / 2),
            bindRetryTime=0.2,
            dynamicMembershipChange=False,
        )

    def _make(self, p: int) -> SyncObj:
        peers = [_shift(addr, p) for addr in self.options.peer_map().values()]
        conf = self._conf()
        assert self._journals is not None
        conf.journalFile = str(self._journals / f"partition-{p}.journal")
        _check_journal(conf.journalFile)
        obj = SyncObj(_shift(self.options.listen, p), peers, conf=conf)
        self._confs[p] = conf
        if p in self._resigned or not self._roles_on(p):
            self._campaign(p, False, obj)  # it only votes: see the module docstring
        return obj

    def _campaign(self, p: int, on: bool, obj: SyncObj | None = None) -> None:
        """Let partition p's SyncObj start elections again (`on`), or only vote: PySyncObj draws every
        election deadline from its conf's timeouts, so pushing them out of reach keeps it from campaigning
        (it validates them only at construction)."""
        conf, et = self._confs[p], self.options.election_timeout
        conf.raftMinTimeout, conf.raftMaxTimeout = (et, 2 * et) if on else (1e9, 2e9)
        obj = self._objs.get(p) if obj is None else obj
        if obj is not None:
            # The deadline already drawn is the one to replace. Going quiet: a new SyncObj drew its first from
            # the normal timeouts, and a fresh node (term 0) that campaigns keeps raising its term until it
            # unseats the leader. Campaigning again: the one drawn while quiet is out of reach, and only a
            # leader's heartbeat would draw another; if that leader has gone, nobody would ever campaign.
            far = monotonic() + (et + random.random() * et if on else 1e9)
            obj._SyncObj__raftElectionDeadline = far

    def _on_start(self) -> None:
        if self.options.data_dir is None:
            self._journals = Path(tempfile.mkdtemp(prefix=f"elect-pysyncobj-{self.member}-"))
        else:
            self._journals = Path(self.options.data_dir) / self.member
            self._journals.mkdir(parents=True, exist_ok=True)
        with self._objs_lock:
            for p in range(self.options.partitions):
                self._objs[p] = self._make(p)
        self._thread = threading.Thread(target=self._run, name=f"pysyncobj-{self.member}", daemon=True)
        self._thread.start()

    def _on_stop(self, timeout: float | None) -> None:
        # Hand over partition by partition while the poll thread keeps renewing the leaderships not yet
        # revoked (their SyncObjs still heartbeat, holding successors back), then shut everything down.
        self._stopping = True
        with self._objs_lock:
            led = sorted(self._leading)
        gone = []
        for p in led:
            for role in self._roles_on(p):
                self._revoke(role, wait=True)
            with self._objs_lock:
                self._leading.pop(p, None)
                obj = self._objs.pop(p, None)
            if obj is not None:
                obj.destroy()
                gone.append(obj)
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        with self._objs_lock:
            objs = list(self._objs.values())
            self._objs.clear()
        for obj in objs:
            obj.destroy()
        if self.options.data_dir is None and self._journals is not None:
            for obj in gone + objs:  # their tick threads close the journals: wait for them, then remove those
                obj.destroy_synchronous()
            shutil.rmtree(self._journals, ignore_errors=True)

    def _on_resign(self, role: Role) -> None:
        p = partition_of(role, self.options.partitions)
        with self._objs_lock:
            self._resigned[p] = time.monotonic() + 10 * self.options.election_timeout
            self._step_down(p, rejoin=True, delay=self.options.election_timeout / 2)

    def _on_roles_changed(self, added: tuple[Role, ...], removed: tuple[Role, ...]) -> None:
        P = self.options.partitions
        with self._objs_lock:
            for role in removed:
                self._revoke(role, wait=True)
            for role in added:
                p = partition_of(role, P)
                if p in self._leading:
                    self._acquire(role, self._leading[p], time.monotonic() + self.options.fallback)
            for p in {partition_of(r, P) for r in (*added, *removed)}:
                if p in self._objs and p not in self._resigned:  # campaign where it contends for a role
                    self._campaign(p, bool(self._roles_on(p)))
            for p in {partition_of(r, P) for r in removed}:
                if p in self._leading and not self._roles_on(p):
                    self._step_down(p, rejoin=True)

    # ------------------------------------------------------------------ polling

    def _roles_on(self, p: int) -> list[Role]:
        P = self.options.partitions
        return [r for r in self.roles if partition_of(r, P) == p]

    def _step_down(self, p: int, *, rejoin: bool, delay: float | None = None) -> None:
        """Revoked (callbacks waited for while the SyncObj still heartbeats), then shut it down; with
        ``rejoin``, start it again after ``delay`` (default ``rejoin_delay``)."""
        for role in self._roles_on(p):
            self._revoke(role, wait=True)
        self._leading.pop(p, None)
        obj = self._objs.pop(p, None)
        if obj is not None:
            # synchronously: the SyncObj that replaces it reads the term and vote from the same journal, so this
            # one must be gone (its tick thread could still grant a vote) before that
            obj.destroy_synchronous()
        if rejoin:
            self._rejoin_at[p] = time.monotonic() + (self.options.rejoin if delay is None else delay)

    def _run(self) -> None:
        o = self.options
        while not self._stop.wait(o.poll):
            try:
                self._poll()
            except Exception:
                log.exception("pysyncobj://%s: poll failed", self.member)

    def _poll(self) -> None:
        o = self.options
        with self._objs_lock:
            now = time.monotonic()
            for p in range(o.partitions):
                obj = self._objs.get(p)
                if obj is None:
                    if now >= self._rejoin_at.get(p, 0.0) and not self._stopping:
                        self._objs[p] = self._make(p)
                    continue
                leads = obj._isLeader()
                term = int(obj.raftCurrentTerm)
                held = self._leading.get(p)
                roles = self._roles_on(p)
                if p in self._resigned and (not leads and obj._getLeader() is not None):
                    del self._resigned[p]  # another node leads it: campaign again if it goes
                    self._campaign(p, bool(roles))
                elif p in self._resigned and now >= self._resigned[p]:
                    del self._resigned[p]  # nobody else wants it: start afresh, campaigning
                    self._step_down(p, rejoin=True, delay=0.0)
                    continue
                if leads and held != term:
                    if self._stopping:
                        continue
                    if held is not None:
                        for role in roles:
                            self._fence(role)
                    if not roles or p in self._resigned:
                        # let a node that contends for this partition have it; come back soon to vote for it
                        self._step_down(p, rejoin=True, delay=o.election_timeout / 2)
                        continue
                    self._leading[p] = term
                    for role in roles:
                        self._acquire(role, term, now + o.fallback)
                elif leads:
                    for role in roles:
                        if self._extend(role, now + o.fallback) is False and self.running:
                            self._acquire(role, term, now + o.fallback)
                elif held is not None:
                    del self._leading[p]
                    for role in roles:
                        self._fence(role)  # PySyncObj saw a newer term or fell back: no orderly handover


def create(options: PySyncObjOptions, member: str, roles: tuple[Role, ...]) -> PySyncObjElector:
    return PySyncObjElector(options, member, roles)
