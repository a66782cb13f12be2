"""What every Sluicegate process shares: JSON logging set up once, its settings and flags, its
servers (TLS with a certificate reloaded in place, and the plain-HTTP probe and metrics
server), and waiting for a stop signal."""
