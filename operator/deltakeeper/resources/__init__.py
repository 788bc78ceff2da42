"""The DeltaTable and DeltaMaintenancePolicy resources: their CRDs and manifest parsing.

No Kubernetes client here: standalone mode checks manifests against the same schemas the API
server enforces (crd.py is the one definition; crds/*.yaml are generated from it).
"""
