"""Standalone mode: the operator's watch loop driven by manifests in a folder, no Kubernetes.

`deltakeeper run --manifests DIR` reads DeltaTable, DeltaMaintenancePolicy, DeltaLake and Secret
manifests from DIR (re-read when a file changes), runs the same watcher, planner and executor
as the operator, serves the same metrics, and writes every table's status to a JSON file that
`deltakeeper status` prints. The same shape as k8s/:

- daemon.py: `run`, the entry point (the operator's is k8s/handlers.py)
- tables.py: the folder's tables in the runtime's registry, and the Sink of their statuses
- lakes.py: DeltaLakes, each scanned on its interval for the tables it holds
- status_file.py: the status file, read at start and written as statuses change
- report.py: the status as the table `deltakeeper status` and `run` print
"""
