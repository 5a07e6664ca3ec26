"""A Haystack run's share of its request: the documents its components served and selected, each
generator call's prompt and answer, and the answer builder's marking, fed to the request's
context capture as the components run.

A pipeline run joins the request open where it starts (``spanledger.request(...)``, or the run
of an outer pipeline); with none open it is a request of its own, opened when it starts and
closed when it ends (``haystack:<pipeline name>:<short id>``). A generator's answer waits for the
answer builder that reads it, so the builder's marking joins the answer's evidence; whatever no
builder read is answered when the run ends. Outside a pipeline run (a component run by an agent
inside ``spanledger.request(...)``) an answer is taken at once.
"""

from __future__ import annotations

import re
import threading
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from spanledger.attribution import ModelCall, OpenRequest, Passage, RequestScope, open_request
from spanledger.integrations.haystack.components import (
    Component,
    GeneratorReply,
    Role,
    documents_in,
    marked_texts,
    passages,
    prompt_parts,
    replies,
    reply_texts,
)

__all__ = ["INPUT", "OUTPUT", "ComponentReader", "Run", "request_name"]

INPUT = "haystack.component.input"
OUTPUT = "haystack.component.output"
_GENERATOR_PROMPT = ("system_prompt", "prompt", "messages")
_UNSAFE = re.compile(r"[^\w.-]+")


def request_name(tags: Mapping[str, Any] | None) -> str:
    """A request id for a pipeline run of its own: ``haystack:<name>:<short id>``, the name from
    the pipeline's ``metadata["name"]`` (else ``run``)."""
    metadata = (tags or {}).get("haystack.pipeline.metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    label = _UNSAFE.sub("-", name).strip("-")[:40] if isinstance(name, str) else ""
    return f"haystack:{label or 'run'}:{uuid.uuid4().hex[:12]}"


@dataclass
class _Answer:
    call: ModelCall
    replies: list[GeneratorReply]
    provider: str
    texts: set[str] = field(default_factory=set)


class Run:
    """What one pipeline run (or the components run outside one) feeds to its request."""

    def __init__(
        self, scope: RequestScope, *, opened: OpenRequest | None = None, deferring: bool = True
    ) -> None:
        self.scope = scope
        self.opened = opened
        """The request this run opened for itself (closed when the run ends)."""
        self.deferring = deferring
        self._lock = threading.Lock()
        self._waiting: list[_Answer] = []
        self._last_prompt: list[str] = []

    @classmethod
    def of_its_own(cls, tags: Mapping[str, Any] | None) -> Run:
        """A pipeline run with no request open: a request of its own."""
        opened = open_request(request_name(tags))
        return cls(opened.scope, opened=opened)

    def serve(self, component: Component, found: Sequence[Passage], *, selected: bool) -> None:
        if found:
            self.scope.context.served(found, provider_id=component.name, selected=selected)

    def remember_prompt(self, parts: list[str]) -> None:
        """A prompt builder's output: the prompt a generator given no prompt of its own gets."""
        with self._lock:
            self._last_prompt = parts

    def prompted(self, parts: list[str]) -> ModelCall | None:
        """A generator call received ``parts``: match them; the frames it rendered were chosen
        for the prompt, so they are selected too."""
        if not parts:
            with self._lock:
                parts = self._last_prompt
            if not parts:
                return None
        call = self.scope.context.prompted(parts)
        if call.match.spans:
            self.scope.frames.select_quietly(list(call.match.spans))
        return call

    def answered(self, call: ModelCall, component: Component, found: list[GeneratorReply]) -> None:
        answer = _Answer(call, found, component.provider, {reply.text for reply in found})
        if self.deferring:
            with self._lock:
                self._waiting.append(answer)
            return
        self._answer(answer, ())

    def marked(self, read: set[str], marked: list[str]) -> None:
        """An answer builder read the replies ``read`` and marked ``marked`` referenced: the
        answers it read are taken with that marking."""
        with self._lock:
            taken = [answer for answer in self._waiting if answer.texts & read]
            self._waiting = [answer for answer in self._waiting if not answer.texts & read]
        for answer in taken:
            self._answer(answer, marked)

    def finish(self) -> None:
        """The run ended: answer what no builder read, and close the request it opened."""
        with self._lock:
            left, self._waiting = self._waiting, []
        try:
            for answer in left:
                self._answer(answer, ())
        finally:
            if self.opened is not None:
                self.opened.close()

    def _answer(self, answer: _Answer, marked: Sequence[str]) -> None:
        found = answer.replies
        self.scope.context.answered(
            answer.call,
            "\n".join(reply.text for reply in found),
            cited=list(dict.fromkeys(text for reply in found for text in reply.cited)),
            marked=marked,
            input_tokens=next((r.input_tokens for r in found if r.input_tokens is not None), None),
            provider=answer.provider,
            model=next((reply.model for reply in found if reply.model is not None), None),
        )


class ComponentReader:
    """Reads one component run's input and output for its run, by the component's role."""

    __slots__ = ("_call", "_read", "component", "run")

    def __init__(self, run: Run, component: Component) -> None:
        self.run = run
        self.component = component
        self._call: ModelCall | None = None
        self._read: set[str] = set()

    def heard(self, key: str, value: object) -> None:
        if not isinstance(value, Mapping):
            return
        if key == INPUT:
            self._input(value)
        elif key == OUTPUT:
            self._output(value)

    def _input(self, values: Mapping[str, Any]) -> None:
        role = self.component.role
        if role is Role.RANKER:
            self.run.serve(self.component, passages(values.get("documents")), selected=False)
        elif role is Role.PROMPT_BUILDER:
            self.run.serve(self.component, documents_in(values), selected=True)
        elif role is Role.GENERATOR:
            self._call = self.run.prompted(prompt_parts(values, _GENERATOR_PROMPT))
        elif role is Role.ANSWER_BUILDER:
            self._read = reply_texts(values)

    def _output(self, values: Mapping[str, Any]) -> None:
        role = self.component.role
        if role is Role.RETRIEVER or role is Role.RANKER:
            self.run.serve(self.component, passages(values.get("documents")), selected=False)
        elif role is Role.PROMPT_BUILDER:
            self.run.remember_prompt(prompt_parts(values, ("prompt",)))
        elif role is Role.GENERATOR:
            found = replies(values)
            if self._call is not None and found:
                self.run.answered(self._call, self.component, found)
        elif role is Role.ANSWER_BUILDER and self._read:
            self.run.marked(self._read, marked_texts(values))
