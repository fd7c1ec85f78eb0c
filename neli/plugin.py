"""The `kafka://` entry point: light, so the registry can validate a URL without confluent_kafka."""

from __future__ import annotations

from elect.registry import Plugin
from neli.options import KafkaOptions

PLUGIN = Plugin(
    scheme="kafka",
    summary="NELI: leadership induced by Kafka consumer-group partition assignment (mode=fast|full)",
    options=KafkaOptions,
    factory="neli.elector:create",
    observer="neli.observe:kafka",
    url_parts={"hosts": "servers", "path": "topic"},
    extra="kafka",
    requires=("confluent_kafka",),
)
