"""Real infrastructure on this machine, started by the project's own code: Kafka, etcd, ZooKeeper and
kube-apiserver as processes (`local`), network-namespace hosts (`netns`), and the compose cluster on Podman or
Docker (`containers`, `images`)."""
