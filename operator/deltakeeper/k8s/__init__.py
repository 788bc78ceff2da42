"""deltakeeper as a Kubernetes operator: `deltakeeper operator` or `kopf run -m deltakeeper.k8s`.

Importing this package registers the kopf handlers (handlers.py), and the DeltaLake handlers
(discovery.py) when DELTAKEEPER_DISCOVERY is true.
"""

from deltakeeper.k8s import handlers as handlers
from deltakeeper.k8s.options import discovery_enabled

if discovery_enabled():
    from deltakeeper.k8s import lake_handlers as lake_handlers
