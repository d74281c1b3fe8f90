"""The Spark job (`spark`, `submit`, `daemon`), the `amqp` data source (`datasource`), and
the rows both make."""
