"""Each vendor endpoint's wire rules, declared once and read by every recording path.

``endpoints`` declares the endpoints; ``read`` reads a response body by its declaration;
``decode`` validates vectors and results; ``http`` holds the HTTP-level rules (routes, bodies,
servers). Providers, SDK instrumentation, the httpx transport and ``record_*(raw=...)`` all read
through here, so they agree on what a body means.
"""

from spanledger.wire.endpoints import ENDPOINTS, Endpoint, Operation, Vendor, endpoint_for

__all__ = ["ENDPOINTS", "Endpoint", "Operation", "Vendor", "endpoint_for"]
