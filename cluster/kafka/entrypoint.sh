#!/bin/sh
# Turn KAFKA_* variables into server.properties (KAFKA_GROUP_MIN_SESSION_TIMEOUT_MS -> group.min.session.timeout.ms,
# the official image's convention), format the KRaft storage with CLUSTER_ID once, then run the broker with the
# JVM options elect_cluster/apache_kafka.py uses on one machine.
set -eu
props=/var/lib/kafka/server.properties
mkdir -p /var/lib/kafka/data
{
    echo "log.dirs=/var/lib/kafka/data"
    env | while IFS='=' read -r name value; do
        case "$name" in
            KAFKA_HEAP_OPTS|KAFKA_OPTS|KAFKA_JVM_*) ;;
            KAFKA_*) echo "$(echo "${name#KAFKA_}" | tr 'A-Z_' 'a-z.')=$value" ;;
        esac
    done
} > "$props"
java="java -Xms64m -Xmx512m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.net.preferIPv4Stack=true"
if [ ! -f /var/lib/kafka/data/meta.properties ]; then
    $java -cp '/opt/kafka/libs/*' kafka.tools.StorageTool format --ignore-formatted -t "$CLUSTER_ID" -c "$props"
fi
exec $java -cp '/opt/kafka/libs/*' kafka.Kafka "$props"
