"""CAS lease election on etcd and ZooKeeper: a pure core (`core`) shared by two store drivers.

`core.LeaseCore` decides; `driver.LeaseElector` runs it against a `driver.Store` (`etcd.EtcdStore`,
`zookeeper.ZooKeeperStore`) and reports leadership through `elect.base.BaseElector`.
"""
