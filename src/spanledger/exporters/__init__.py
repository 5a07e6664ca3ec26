"""Sinks that render events: the JSONL event log and the console line."""

from spanledger.exporters.console import ConsoleSink, describe_event
from spanledger.exporters.jsonl import JsonlSink

__all__ = ["ConsoleSink", "JsonlSink", "describe_event"]
