"""CAS lease election on etcd, ZooKeeper and Kubernetes Lease objects: a pure core (`core`) shared by three store
clients.

`core.LeaseCore` decides; `driver.LeaseElector` runs it against a `driver.Store` (`etcd.EtcdStore`,
`zookeeper.ZooKeeperStore`, `kubernetes.KubernetesStore`) and reports leadership through `elect.base.BaseElector`.
"""
