"""A rerank call recorded inside an open request serves its documents to the request's context
and selects the ones its results name: the served and selected sets with no framework, for
every path the recording core records (provider classes, SDK captures, the transport, the
switch, ``record_rerank``).

The documents' texts go only to the request's in-memory capture, which forgets them when the
request closes; each frame is named by the id the request gave its document where it gave one,
else by its content digest. A request whose frames are served by hand (``RequestScope.serve``)
is attributed by hand: what its rerank calls served is then left out.
"""

from __future__ import annotations

from spanledger.attribution.context import Passage
from spanledger.attribution.scope import RequestScope
from spanledger.recording.facts import Figures, RerankFacts, texts_only

__all__ = ["serve_reranked"]


def serve_reranked(scope: RequestScope, facts: RerankFacts, figures: Figures) -> None:
    """Serve ``facts``' documents to ``scope`` (unselected), then select those its results
    name. Nothing is served when the documents are not all texts or no result names one."""
    texts = texts_only(facts.documents)
    positions = _positions(figures)
    if not texts or positions is None:
        return
    ids = facts.document_ids
    passages: dict[str, Passage] = {}
    for position, text in enumerate(texts):
        if text not in passages:
            ident = ids[position] if ids is not None and position < len(ids) else None
            passages[text] = Passage(text, ident if isinstance(ident, str) and ident else None)
    chosen = [passages[texts[i]] for i in positions if 0 <= i < len(texts)]
    scope.context.reranked(list(passages.values()), chosen, provider_id=facts.provider)


def _positions(figures: Figures) -> tuple[int, ...] | None:
    """The document positions the results name: read off the wire, else off the results the
    path built; ``None`` when the path knows neither."""
    if figures.positions is not None:
        return figures.positions
    if figures.results is not None:
        return tuple(result.index for result in figures.results)
    return None
