"""codec/amqp10."""
