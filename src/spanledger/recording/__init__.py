"""The one recording core under every path: what a call asked for (``facts``), what its
response reported (``Figures``), and the ``Recording`` that turns an attempt into its one event.

Providers, SDK instrumentation, the httpx transport and the manual blocks all record through a
``Recording``, so the start notice, the common fields, failures, estimates and retries are
written once.
"""

from spanledger.recording.call import Recording, logged
from spanledger.recording.facts import CallFacts, EmbedFacts, Figures, RerankFacts

__all__ = ["CallFacts", "EmbedFacts", "Figures", "Recording", "RerankFacts", "logged"]
