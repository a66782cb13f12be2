"""What every Sluicegate process shares: JSON logging set up once, the plain-HTTP probe and
metrics server, and waiting for a stop signal."""
