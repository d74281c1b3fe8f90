"""A message's path across connections (sans-IO, after track/ and diagnose/): `follow`."""

from amqpscope.journeys.follow import Follower, Hop, Journey
from amqpscope.journeys.paths import Paths

__all__ = ["Follower", "Hop", "Journey", "Paths"]
