"""How a failed job is restarted (Flink's ``executiongraph.failover``): restart backoff time strategies."""
