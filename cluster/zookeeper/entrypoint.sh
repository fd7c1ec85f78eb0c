#!/bin/sh
# Write zoo.cfg from ZOO_* variables (the names the official image reads) and run one ZooKeeper node with the
# JVM options elect_cluster/zookeeper.py uses on one machine.
set -eu
data=/var/lib/zookeeper/data
mkdir -p "$data"
echo "${ZOO_MY_ID:-1}" > "$data/myid"
cfg=/var/lib/zookeeper/zoo.cfg
{
    echo "tickTime=${ZOO_TICK_TIME:-2000}"
    echo "initLimit=${ZOO_INIT_LIMIT:-5}"
    echo "syncLimit=${ZOO_SYNC_LIMIT:-2}"
    echo "dataDir=$data"
    echo "clientPort=2181"
    echo "maxClientCnxns=${ZOO_MAX_CLIENT_CNXNS:-0}"
    echo "4lw.commands.whitelist=${ZOO_4LW_COMMANDS_WHITELIST:-srvr}"
    echo "admin.enableServer=${ZOO_ADMINSERVER_ENABLED:-false}"
    for word in ${ZOO_CFG_EXTRA:-}; do echo "$word"; done
    for server in ${ZOO_SERVERS:-}; do echo "$server"; done
} > "$cfg"
cp=/usr/share/java/zookeeper.jar
for binding in slf4j-simple.jar slf4j-nop.jar; do
    if [ -f "/usr/share/java/$binding" ]; then cp="$cp:/usr/share/java/$binding"; break; fi
done
exec java -Xms32m -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.net.preferIPv4Stack=true \
    -Dzookeeper.jmx.log4j.disable=true -cp "$cp" org.apache.zookeeper.server.quorum.QuorumPeerMain "$cfg"
