"""The daemon both front-ends share (operator and standalone mode), no Kubernetes here.

watcher (one table), fleet (loops, limits), targets (spec -> Target), status, credentials
(Secret -> storage options, scrubbing), metrics (names and exposition).
"""
