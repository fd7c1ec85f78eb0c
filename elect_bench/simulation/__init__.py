"""Deterministic simulation of every core on virtual time: Raft nodes (`raft_world`, runs: `raft_runner`), lease
members against a simulated etcd or ZooKeeper (`lease_world`) and NELI members against a simulated Kafka broker
(`neli_world`), struck by seeded chaos (`seeded_chaos`, runs: `chaos_runner`) and judged by the harness's own
checker."""
