"""deltakeeper's resources: DeltaTable, DeltaMaintenancePolicy and DeltaLake.

Their CRDs as data (crd.py; crds/*.yaml are generated from it), manifest parsing, validation
and policy selection (manifests.py), DeltaLake manifests and the DeltaTables a lake makes
(lake.py), the Kubernetes names deltakeeper derives (names.py), and every rule from a spec to
settings (spec.py).

No Kubernetes client here: standalone mode checks manifests against the same schemas the API
server enforces.
"""
