"""The daemon both front-ends share (the operator in k8s/, standalone mode), no Kubernetes here.

model (Target, Observation, conditions and events as named values), watcher (one table's state
machine), conditions (which conditions and events hold), status (the status built from an
observation), fleet (the loops and the maintenance slots), registry (tables -> loops; the one
publish: metrics, then the front-end's sink), targets (a resource -> a Target), credentials
(Secret -> storage options, scrubbing), metrics (names and exposition), jobs (a table's running
compaction job), discovery (scanning a DeltaLake).
"""
