"""Readers for settings: one per kind of value (port, URL, host, seconds, flag, headers,
secret, event-log path, price table), each turning a bad value into a ``ConfigurationError``
that names where the value came from (an environment variable or an argument) and what was
expected, never a secret's value.
"""

from __future__ import annotations

import ipaddress
import math
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import NoReturn
from urllib.parse import unquote, urlsplit

from spanledger.errors import ConfigurationError
from spanledger.ledger.pricer import Pricer
from spanledger.ledger.prices import PriceTable, PriceTableError, brief_repr

__all__ = [
    "MAX_SHUTDOWN_TIMEOUT",
    "Value",
    "event_log_path",
    "flag",
    "from_env",
    "headers",
    "host",
    "milliseconds",
    "otlp_metrics_wanted",
    "pick",
    "port",
    "price_table",
    "seconds",
    "secret",
    "url",
    "writable_event_log",
]

MAX_SHUTDOWN_TIMEOUT = 3600.0
"""The longest shutdown timeout accepted, in seconds: beyond an hour a shutdown is not bounded
in any useful sense (and far larger values overflow the waits they are passed to)."""

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"", "0", "false", "no", "off"})
_METRICS_EXPORTERS = ("otlp", "prometheus", "console", "logging", "none")
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_HOST_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOST_NAME = re.compile(rf"(?=.{{1,253}}$){_HOST_LABEL}(?:\.{_HOST_LABEL})*\.?")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class Value:
    """A raw setting and where it came from: an environment variable or an argument."""

    source: str
    raw: object


def pick(
    argument: object, argument_name: str, env: Mapping[str, str], variable: str
) -> Value | None:
    """The argument when given, else the variable when set to something; ``None`` otherwise."""
    if argument is not None:
        return Value(f"configure({argument_name}=...)", argument)
    return from_env(env, variable)


def from_env(env: Mapping[str, str], variable: str) -> Value | None:
    text = env.get(variable)
    return Value(variable, text) if text else None


# --------------------------------------------------------------------------- one reader per kind


def port(value: Value) -> int:
    """A TCP port from 1 to 65535. Port 0 (any free port) is refused: configure() gives no way
    to learn which port was picked, so Prometheus could not be pointed at it."""
    raw = value.raw
    port: int | None = None
    if isinstance(raw, str) and raw.strip().isascii() and raw.strip().isdigit():
        port = int(raw.strip()) if len(raw.strip()) <= 5 else None
    elif isinstance(raw, int) and not isinstance(raw, bool):
        port = raw
    if port is None or not 1 <= port <= 65535:
        why = ": port 0 would pick a random port Prometheus cannot be told to scrape"
        raise ConfigurationError(
            f"{value.source} must be a port number from 1 to 65535, not {brief_repr(raw)}"
            + (why if port == 0 else "")
        )
    return port


def url(value: Value, example: str) -> str:
    """An ``http://`` or ``https://`` URL with a host, without a trailing slash. The URL itself
    is never echoed: it can carry credentials."""
    is_text = isinstance(value.raw, str)
    text = value.raw.strip() if isinstance(value.raw, str) else ""
    problem = _url_problem(text) if is_text else f"got a {type(value.raw).__name__}"
    if problem is not None:
        raise ConfigurationError(
            f"{value.source} must be an http:// or https:// URL with a host, such as {example} "
            f"({problem})"
        )
    return text.rstrip("/")


def _url_problem(text: str) -> str | None:
    if _CONTROL.search(text) or " " in text:
        return "it contains whitespace or a control character"
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        return "its host or port cannot be read"
    if "://" not in text:
        return "it does not start with http:// or https://"
    if parts.scheme.lower() not in ("http", "https"):
        return f"its scheme is {parts.scheme!r}"
    if not parts.hostname:
        return "it has no host"
    if port == 0:
        return "its port is 0"
    return None


def host(value: Value) -> str:
    """An address to listen on: an IP address or a host name, without scheme or port."""
    raw = value.raw
    text = raw.strip() if isinstance(raw, str) else ""
    try:
        ipaddress.ip_address(text)
    except ValueError:
        if not _HOST_NAME.fullmatch(text):
            raise ConfigurationError(
                f"{value.source} must be an IP address or host name to listen on, such as "
                f"127.0.0.1 or 0.0.0.0 (no scheme, no port), not {brief_repr(raw)}"
            ) from None
    return text


def _positive_number(raw: object, ceiling: float = math.inf) -> float | None:
    """A finite number above 0 and at most ``ceiling``, from text or a number; else ``None``."""
    number: float | None = None
    if isinstance(raw, str):
        try:
            number = float(raw.strip())
        except ValueError:
            return None
    elif isinstance(raw, int | float) and not isinstance(raw, bool):
        number = float(raw)
    if number is None or not math.isfinite(number) or not 0 < number <= ceiling:
        return None
    return number


def seconds(value: Value) -> float:
    """A number of seconds, greater than 0 and at most ``MAX_SHUTDOWN_TIMEOUT``."""
    raw = value.raw
    seconds = _positive_number(raw, MAX_SHUTDOWN_TIMEOUT)
    if seconds is None:
        raise ConfigurationError(
            f"{value.source} must be a number of seconds greater than 0 and at most "
            f"{MAX_SHUTDOWN_TIMEOUT:g}, not {brief_repr(raw)}"
        )
    return seconds


def milliseconds(value: Value) -> float:
    """A positive, finite number of milliseconds (an OTel SDK interval), in seconds."""
    raw = value.raw
    number = _positive_number(raw)
    if number is None:
        raise ConfigurationError(
            f"{value.source} must be a positive number of milliseconds, not {brief_repr(raw)}"
        )
    return number / 1000


def flag(value: Value) -> bool:
    """On or off: a bool argument, or one of the usual words (an unknown word is an error,
    not a silent "off")."""
    raw = value.raw
    if isinstance(raw, bool):
        return raw
    word = raw.strip().lower() if isinstance(raw, str) else None
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise ConfigurationError(
        f"{value.source} must be one of {', '.join(sorted(_TRUE))} (on) or "
        f"{', '.join(sorted(_FALSE - {''}))} (off), not {brief_repr(raw)}"
    )


def _listed(value: Value, name: str, form: str) -> Iterator[tuple[int, str, str]]:
    """The ``form`` entries (``name=value``) of a comma-separated setting, URL-decoded, with
    their positions (1 is the first); an entry without ``=`` is refused by position."""
    for position, entry in enumerate(str(value.raw).split(","), start=1):
        if not entry.strip():
            continue
        key, separator, text = entry.partition("=")
        if not separator:
            _refuse_entry(value, position, f"has no '=' between a {name} and its value", form)
        yield position, unquote(key.strip()), unquote(text.strip())


def _refuse_entry(value: Value, position: int, problem: str, form: str) -> NoReturn:
    """A bad entry, named by its position, never by its content (header values are
    credentials)."""
    raise ConfigurationError(
        f"{value.source} entry {position} {problem} (entries are {form}, comma-separated; "
        "values are not shown)"
    )


def headers(value: Value) -> dict[str, str]:
    """OTLP headers: comma-separated ``name=value`` entries, URL-encoded."""
    headers: dict[str, str] = {}
    for position, name, text in _listed(value, "header name", "name=value"):
        if not _HEADER_NAME.fullmatch(name):
            problem = "has no valid header name before its '='"
            _refuse_entry(value, position, problem, "name=value")
        if _CONTROL.search(text):
            _refuse_entry(value, position, "has a control character in its value", "name=value")
        headers[name.lower()] = text
    return headers


def resource_attributes(value: Value) -> dict[str, str]:
    """``OTEL_RESOURCE_ATTRIBUTES``: comma-separated ``key=value`` entries, URL-encoded."""
    attributes: dict[str, str] = {}
    for position, key, text in _listed(value, "key", "key=value"):
        if not key or _CONTROL.search(key) or any(c.isspace() for c in key):
            problem = "has no key before its '=' (a key is one word)"
            _refuse_entry(value, position, problem, "key=value")
        if _CONTROL.search(text):
            _refuse_entry(value, position, "has a control character in its value", "key=value")
        attributes[key] = text
    return attributes


def secret(value: Value) -> str:
    """A credential: any text without whitespace or control characters (never shown)."""
    raw = value.raw
    if not isinstance(raw, str) or _CONTROL.search(raw) or any(c.isspace() for c in raw):
        raise ConfigurationError(
            f"{value.source} contains whitespace or a control character (its value is not "
            "shown); a key is one word"
        )
    return raw


def otlp_metrics_wanted(value: Value | None) -> bool:
    """``OTEL_METRICS_EXPORTER``: a comma-separated list of the standard exporter names; OTLP
    metrics are sent when it is unset or names ``otlp``."""
    if value is None:
        return True
    names = [name.strip().lower() for name in str(value.raw).split(",")]
    if not all(name in _METRICS_EXPORTERS for name in names):
        raise ConfigurationError(
            f"{value.source} must be a comma-separated list of "
            f"{', '.join(_METRICS_EXPORTERS[:-1])} or {_METRICS_EXPORTERS[-1]}, "
            f"not {brief_repr(value.raw)}"
        )
    return "otlp" in names


def writable_event_log(path: str | PathLike[str], *, named: str) -> Path:
    """``path`` checked as ``configure()`` checks an event log (a file that can be appended to,
    or created); a ``ConfigurationError`` names it as ``named`` (a command-line option, say)."""
    return event_log_path(Value(named, path))


def event_log_path(value: Value, *, directory: bool = False) -> Path:
    """A file the event log can be appended to (or created in a writable directory); with
    ``directory``, a writable directory (where each process writes files of its own) will do
    too."""
    raw = value.raw
    if not isinstance(raw, str | PathLike) or "\x00" in os.fsdecode(raw):
        raise ConfigurationError(f"{value.source} must be a file path, not {brief_repr(raw)}")
    path = Path(os.fsdecode(raw))
    try:
        problem = _event_log_problem(path, directory)
    except OSError as error:
        problem = f"cannot be checked ({error.strerror or type(error).__name__})"
    if problem is not None:
        raise ConfigurationError(f"{value.source} names {str(path)!r}, which {problem}")
    return path


def _event_log_problem(path: Path, directory: bool) -> str | None:
    if path.is_dir():
        if not directory:
            return "is a directory, not a file to append events to"
        return None if os.access(path, os.W_OK | os.X_OK) else "is a directory that is not writable"
    if path.exists():
        return None if os.access(path, os.W_OK) else "is not writable"
    if path.is_symlink():  # dangling: appending creates its target where that can be made
        target = Path(os.path.realpath(path))
        if not target.parent.is_dir():
            return (
                f"is a symbolic link to {str(target)!r}, a file that cannot be created "
                "(its directory does not exist)"
            )
        if not os.access(target.parent, os.W_OK | os.X_OK):
            return (
                f"is a symbolic link to {str(target)!r}, a file that cannot be created "
                "(its directory is not writable)"
            )
        return None
    ancestor = path.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        return f"cannot be created because {str(ancestor)!r} is not a directory"
    if not os.access(ancestor, os.W_OK | os.X_OK):
        return f"cannot be created because {str(ancestor)!r} is not writable"
    return None


def price_table(value: Value) -> Pricer | PriceTable:
    """A pricer or table as given, or the table loaded from a path (its error names both the
    setting and the file)."""
    raw = value.raw
    if isinstance(raw, Pricer | PriceTable):
        return raw
    if not isinstance(raw, str | PathLike):
        raise ConfigurationError(
            f"{value.source} must be a price table, a Ledger or a path to a table file, "
            f"not a {type(raw).__name__}"
        )
    try:
        return PriceTable.load(raw)
    except PriceTableError as error:
        raise PriceTableError(f"{value.source} names an unusable price table: {error}") from None
