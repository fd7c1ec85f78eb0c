"""Wire types of the raft:// elector, generated from raft.proto by generate.sh (installed as
``raft_priority.proto`` through the symlink raft_priority/proto -> ../proto)."""
