"""Sinks that render events: the JSONL event log and the console line; and where the shipped
Prometheus alert rules are."""

from spanledger.exporters.alert_rules import alert_rules_path
from spanledger.exporters.console import ConsoleSink, describe_event
from spanledger.exporters.jsonl import JsonlSink

__all__ = ["ConsoleSink", "JsonlSink", "alert_rules_path", "describe_event"]
