"""``Fingerprint``, the pydantic record of a body's length and digest, apart from
``spanledger.errors`` so that importing the errors (as the command line does) does not build a
pydantic model; ``spanledger.errors`` hands it out on first use, under its own name."""

from __future__ import annotations

import hashlib

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Fingerprint"]


class Fingerprint(BaseModel):
    """Byte length and SHA-256 of a body: identifies it without carrying it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    byte_length: int = Field(ge=0, strict=True)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")

    @classmethod
    def of(cls, body: bytes) -> Fingerprint:
        """The fingerprint of ``body``: its length and digest, never the bytes themselves."""
        return cls(byte_length=len(body), sha256=hashlib.sha256(body).hexdigest())


Fingerprint.__module__ = "spanledger.errors"  # its public home: pickles and docs name it there
