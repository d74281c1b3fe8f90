"""AMQP 1.0 state: connection, sessions, links, credit, windows, deliveries, transactions."""

from amqpscope.track.amqp10.connection import ConnectionTracker

__all__ = ["ConnectionTracker"]
