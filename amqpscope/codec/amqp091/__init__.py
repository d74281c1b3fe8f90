"""codec/amqp091."""
