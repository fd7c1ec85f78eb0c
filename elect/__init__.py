"""Leader election per role, three ways (Raft with priorities, NELI over Kafka, CAS leases on etcd, ZooKeeper or
Kubernetes Lease objects), behind one contract, with a harness that measures how each hands over when things fail.

    import elect
    e = elect.connect("memory://demo", roles=["prices.EURUSD"], member="a")
    with e:
        e.subscribe(print)
        e.is_leader("prices.EURUSD")
        e.run("prices.EURUSD", work)   # work(lead, stop) while leading; a handover waits for it
        e.observe(print)               # LeaderChanged(role, leader, token): whom it sees lead
                                       # (memory, raft, etcd, zookeeper, kubernetes)
        e.metrics().serve(9100)        # Prometheus metrics of this member (the `metrics` extra)
        e.transfer("prices.EURUSD", to="b")  # to a named member (memory, raft, etcd, zookeeper, kubernetes)
        e.drain()                      # hand over, see the successors take over, stop
"""

from elect.config import ElectorSpec, connect, from_config, parse_url, spec_from_config, spec_from_url
from elect.contract import Characteristics, Drained, Elector, Leadership, Requirements, Running, Transferred
from elect.errors import (
    AccessRefused,
    ConfigError,
    ElectError,
    InfrastructureUnavailable,
    MissingExtra,
    NotLeader,
    NotStarted,
    NotSupported,
    TransferRefused,
    UnknownScheme,
    UnsatisfiedRequirement,
)
from elect.events import Acquired, Event, Fenced, Revoked
from elect.observe import LeaderChanged
from elect.roles import Role, partition_of

__all__ = [
    "AccessRefused", "Acquired", "Characteristics", "ConfigError", "Drained", "ElectError", "Elector", "ElectorSpec",
    "Event",
    "Fenced", "InfrastructureUnavailable", "LeaderChanged", "Leadership", "MissingExtra", "NotLeader", "NotStarted",
    "NotSupported", "Requirements", "Revoked", "Role", "Running", "TransferRefused", "Transferred", "UnknownScheme",
    "UnsatisfiedRequirement", "connect", "from_config", "parse_url", "partition_of", "spec_from_config",
    "spec_from_url",
]
__version__ = "0.1.0"
