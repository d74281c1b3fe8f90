"""A message's path across connections (sans-IO, after track/ and diagnose/): `follow`."""

from amqpscope.journeys.follow import Follower, Hop, Journey

__all__ = ["Follower", "Hop", "Journey"]
