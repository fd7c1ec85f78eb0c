"""NELI over Kafka: leadership per role induced by consumer-group partition assignment (`kafka://`).

    kafka://HOST:PORT[,HOST:PORT]/TOPIC?group=G&mode=fast|full&session_timeout=1.0&heartbeat_interval=0.1
        &heartbeat_timeout=0.75&group_heartbeat_interval=0.1&poll_interval=0.05&partitions=M
        &assignment=cooperative-sticky|range|roundrobin&static_membership=false&connect_timeout=10
        &revoke_timeout=30&rejoin_delay=2.0&replication=-1

The members subscribe to TOPIC (M partitions, created on first use) in consumer group G. Role j maps to
partition `j mod M` (names by a stable hash); the member that owns partition k leads the roles on k.

mode=fast (default; goNELI's variant, for many roles): the owner of k publishes a heartbeat to k every
heartbeat_interval and reads it back; it leads from its first own heartbeat and until heartbeat_timeout
after the last one it sent that came back (`Fenced` then; `Acquired` again if its heartbeats return
while it still owns k). Only its own current heartbeats count (member, run, assignment epoch), so a
member cut off from the broker cannot lead on its successor's records. An orderly revocation emits
`Revoked` inside the rebalance callback, which waits for the application: the successor starts after.
Exclusive, enforced by the rule heartbeat_timeout + group_heartbeat_interval < session_timeout: a
cut-off owner fences itself before the coordinator can expire its session and give k away. And since a
group can still hand k to a second member while the first has not learned it lost k (measured here:
the embedded broker once gave a live member's partitions away without revoking them), ownership is
checked on the partition itself: an owner that reads another member's heartbeat on k fences at once if
it leads, and nobody acquires k until the other's heartbeats are heartbeat_timeout x (1 + max_drift) old
(their age from the sender's wall clock; the margin covers the clocks' rates and offsets, docs/clocks.md).
A contested partition stays unled until the group settles; never led twice.
The log's order is not the send order (a broker frozen for seconds appends what its sockets held, every
sender's, in any order), so an owner leads only on an own heartbeat read at k's end as last fetched, and
a leader fences on a fresh heartbeat of another member appended after the one its leadership began on.
A member that gives k up in order (a rebalance's revoke, resign, stop) publishes a `released` record to k
once its `Revoked` callbacks have returned (or `revoke_timeout` ran out): a successor does not wait for
that member's earlier heartbeats to age, so a graceful handover takes what the group takes to move k plus
one own heartbeat read back. What the barrier guarantees, on both group protocols: the successor's
`Acquired` comes after the leaver's `Revoked` callbacks returned, or after `revoke_timeout` if they did not;
after a lost partition (a session expired behind the member's back) no release is published and the
successor waits heartbeat_timeout after the last record it read from the member.
A topic that disappears (a broker that lost its log) is created again with the group's M partitions
and the member rejoins (on the embedded Tansu the group does not always form again after such a restart).

mode=full (the paper's non-exclusive variant): every member publishes to every partition each
heartbeat_interval and leads partition i while its latest record on i (any member of the group) is
younger than T = heartbeat_timeout. With T above the exclusivity bound (default T = 2 x session_timeout)
an owner keeps leading after it loses k until its evidence is T old, so successive leaders overlap by
at most T plus one heartbeat interval instead of leaving a gap (a dropped owner that has not noticed
extends on its own records until it reads its successor's first token, one successor heartbeat after it
began). `Revoked` when T runs out after an orderly revocation, `Fenced` otherwise. With heartbeat_timeout
+ group_heartbeat_interval < session_timeout it behaves exclusively like fast mode (gaps instead of
overlap) and ends leadership in the rebalance callback.

Tokens: the offset of a leadership's first evidence record in its partition; offsets only grow, so
tokens strictly increase across the successive owners of a partition.

Limits that come from Kafka: a member cannot give back one partition, so `resign` and removing a led
role park the member for rejoin_delay (all of the member's partitions move; the assignor may hand the
partition back when it returns). Parking subscribes the member to TOPIC.parked (one partition, created
on first use, never written) instead of TOPIC, so it hands over through an ordinary rebalance and stays
in the group; `stop` parks too and leaves the group once that rebalance is done (neli/elector.py says
why a LeaveGroup at any other moment can leave a group without a working leader). Members should
contend for the same roles, as in the paper: a role on a partition owned by a member that does not
contend for it has no leader. While a `Revoked` callback blocks, the poll thread does not read
heartbeats, so leaderships on the member's other partitions lapse if it blocks longer than
heartbeat_timeout.

Apache Kafka: the broker must allow the session timeout (group.min.session.timeout.ms, 6 s by default;
the paper suggests 100 ms) and group.initial.rebalance.delay.ms=0 avoids a 3 s wait when a group forms; on
KIP-848 (protocol=consumer) the member sets its group's session, heartbeat and assignment interval (0: the
broker default of Kafka 4.3+ batches assignments for 1 s) itself (neli/group.py);
heartbeats are only read live: a leader topic the elector creates keeps an hour of them and is warmed past its
first index entries before anyone leads (neli/topic.py says why); give a topic made by hand a short retention.ms.
static_membership=true keeps a restarted member's partitions, but a stopped member then hands over only when its
session expires.
"""

from neli.options import KafkaOptions

__all__ = ["KafkaOptions"]
