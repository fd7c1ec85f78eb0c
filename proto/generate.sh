#!/usr/bin/env bash
# Regenerate raft_priority/wire/raft_pb2.py and .pyi from proto/raft.proto with grpcio-tools (pip install 'elect[dev]').
# The generated files are committed; no _pb2_grpc.py: raft_priority/transport.py declares its gRPC
# method handlers by hand, so everything it touches is typed.
#
# The gencode pins a minimum protobuf runtime (protoc 35.x writes "runtime >= 7.35.x" into raft_pb2.py);
# keep the `raft` extra's protobuf lower bound in pyproject.toml equal to the version printed below.
set -euo pipefail
cd "$(dirname "$0")"
PYTHON="${PYTHON:-python3}"
out=../raft_priority/wire
"$PYTHON" -m grpc_tools.protoc --proto_path=. --python_out="$out" --pyi_out="$out" raft.proto
for f in "$out/raft_pb2.py" "$out/raft_pb2.pyi"; do  # generated: not ours to lint
    { echo "# ruff: noqa"; cat "$f"; } > "$f.tmp" && mv "$f.tmp" "$f"
done
grep -o "Protobuf Python Version: .*" "$out/raft_pb2.py"
