"""The metrics face: Prometheus families read from the trackers' state (`families.FAMILIES`, the
one table of them), sampled over capture time (`sampler`), written as OpenMetrics with
timestamps (`openmetrics`) or served live through prometheus_client (`serve`, the only module
that imports it, and only when asked)."""
