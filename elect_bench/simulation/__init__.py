"""Deterministic simulation of every method on virtual time: Raft nodes (`raft_world`, runs: `raft_runner`), lease
members against a simulated etcd or ZooKeeper (`lease_world`) and NELI members against a simulated Kafka broker
(`neli_world`), each member the real elector with its I/O simulated (`runtime`, `raft_elector`), struck by seeded
chaos (`seeded_chaos`, runs: `chaos_runner`) and judged by the harness's own checker."""
