"""AWS's SDK (``botocore``, under boto3): Bedrock's ``bedrock-runtime`` and
``bedrock-agent-runtime`` clients, recorded through the client's own event hooks (``client``).
botocore keeps no operation method on a shared class, so the switch catches clients as botocore
makes them, and those made before it at their first call (``creation``)."""

from __future__ import annotations

from spanledger.capture.declaration import Integration

__all__ = ["INTEGRATION"]

INTEGRATION = Integration(
    name="botocore",
    distribution="botocore",
    tested=(((1, 43), (2,)),),
    accepts="boto3 bedrock-runtime and bedrock-agent-runtime clients",
    installs=f"{__name__}.client",
    creation=f"{__name__}.creation",
)
