"""Policy -> plan -> execute, one table at a time. No Kubernetes here."""
