"""deltakeeper as a Kubernetes operator: `deltakeeper operator` or `kopf run -m deltakeeper.k8s`.

Importing this package registers the kopf handlers (handlers.py).
"""

from deltakeeper.k8s import handlers as handlers
