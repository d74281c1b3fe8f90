"""AMQP 0-9-1 state: connection, channels, consumers, deliveries, confirms, transactions."""

from amqpscope.track.amqp091.connection import ConnectionTracker
from amqpscope.track.amqp091.journeys import Correlator

__all__ = ["ConnectionTracker", "Correlator"]
