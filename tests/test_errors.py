"""Error categories, body fingerprints, Retry-After parsing and the secret-free ProviderError."""

from __future__ import annotations

import hashlib
import math
import pickle
import traceback
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from spanledger.errors import ErrorCategory, Fingerprint, ProviderError, parse_retry_after

BODY_SENTINEL = "SENTINEL-BODY-7f3a"
KEY_SENTINEL = "sk-SENTINEL-KEY-91c2"
NOW = datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC)

ALL_CATEGORIES = {
    "provider_authentication",
    "provider_unavailable",
    "provider_invalid_model",
    "provider_model_not_loaded",
    "provider_rate_limit",
    "provider_invalid_response",
    "provider_invalid_request",
    "interrupted",
}
TRANSIENT = {"provider_unavailable", "provider_model_not_loaded", "provider_rate_limit"}


# --- categories -------------------------------------------------------------------------


def test_error_category_has_exactly_the_eight_values() -> None:
    assert {c.value for c in ErrorCategory} == ALL_CATEGORIES
    assert len(ErrorCategory) == 8


@pytest.mark.parametrize("category", list(ErrorCategory), ids=str)
def test_transient_only_for_unavailable_model_not_loaded_and_rate_limit(
    category: ErrorCategory,
) -> None:
    assert category.transient is (category.value in TRANSIENT)


def test_error_category_is_a_string_enum() -> None:
    assert ErrorCategory("provider_rate_limit") is ErrorCategory.RATE_LIMIT
    assert isinstance(ErrorCategory.RATE_LIMIT, str)
    assert str(ErrorCategory.AUTHENTICATION) == "provider_authentication"
    with pytest.raises(ValueError, match="provider_timeout"):
        ErrorCategory("provider_timeout")


# --- fingerprints -----------------------------------------------------------------------


@pytest.mark.parametrize("body", [b"", b"{}", b'{"error": "nope"}', bytes(range(256)) * 40])
def test_fingerprint_is_byte_length_and_sha256(body: bytes) -> None:
    fp = Fingerprint.of(body)
    assert fp.byte_length == len(body)
    assert fp.sha256 == hashlib.sha256(body).hexdigest()


def test_fingerprint_counts_bytes_not_characters() -> None:
    body = "héllo ✓".encode()
    assert Fingerprint.of(body).byte_length == len(body) == 10


def test_fingerprint_distinguishes_bodies_and_matches_equal_ones() -> None:
    assert Fingerprint.of(b"a") == Fingerprint.of(b"a")
    assert Fingerprint.of(b"a") != Fingerprint.of(b"b")


def test_fingerprint_validation() -> None:
    with pytest.raises(ValidationError):
        Fingerprint(byte_length=-1, sha256="0" * 64)
    with pytest.raises(ValidationError):
        Fingerprint(byte_length=1, sha256="xyz")
    with pytest.raises(ValidationError):
        Fingerprint(byte_length=True, sha256="0" * 64)
    fp = Fingerprint.of(b"x")
    assert Fingerprint.model_validate_json(fp.model_dump_json()) == fp


# --- Retry-After ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "seconds"),
    [("30", 30.0), (" 7 ", 7.0), ("0", 0.0), ("\t120\r\n", 120.0), ("86400", 86400.0)],
)
def test_parse_retry_after_delta_seconds(header: str, seconds: float) -> None:
    result = parse_retry_after(header, now=NOW)
    assert result == seconds
    assert type(result) is float


def test_parse_retry_after_http_date_in_the_future() -> None:
    header = format_datetime(NOW + timedelta(seconds=90), usegmt=True)
    assert parse_retry_after(header, now=NOW) == 90.0


def test_parse_retry_after_http_date_without_zone_is_utc() -> None:
    header = "Sun, 01 Jun 2025 12:01:30 -0000"
    assert parse_retry_after(header, now=NOW) == 90.0


def test_parse_retry_after_http_date_in_the_past_is_zero() -> None:
    header = format_datetime(NOW - timedelta(minutes=5), usegmt=True)
    assert parse_retry_after(header, now=NOW) == 0.0


def test_parse_retry_after_defaults_now_to_the_clock() -> None:
    header = format_datetime(datetime.now(UTC) + timedelta(hours=1), usegmt=True)
    result = parse_retry_after(header)
    assert result is not None
    assert 3500.0 < result <= 3600.0


@pytest.mark.parametrize(
    "header",
    [None, "", "   ", "garbage", "-5", "1.5", "+5", "30s", "soon", "Mon, 99 Foo 2025"],
)
def test_parse_retry_after_unreadable_is_none(header: str | None) -> None:
    assert parse_retry_after(header, now=NOW) is None


@pytest.mark.parametrize(
    "header",
    [
        "\u00b2",  # SUPERSCRIPT TWO: str.isdigit() is true, int() refuses it
        "\u0663",  # ARABIC-INDIC DIGIT THREE: not an HTTP DIGIT
        "1" * 5000,  # beyond int()'s digit limit
    ],
    ids=["superscript-two", "arabic-indic-three", "5000-digits"],
)
def test_parse_retry_after_non_http_digits_are_unreadable_not_a_crash(header: str) -> None:
    # RFC 9110 delta-seconds is 1*DIGIT (ASCII). Anything else is unreadable: None, no raise.
    assert parse_retry_after(header, now=NOW) is None


@settings(derandomize=True, max_examples=300)
@given(st.text(max_size=40))
def test_parse_retry_after_never_raises(header: str) -> None:
    result = parse_retry_after(header, now=NOW)
    assert result is None or (type(result) is float and math.isfinite(result) and result >= 0)


# --- ProviderError ----------------------------------------------------------------------


def _secret_body() -> bytes:
    return f'{{"error": "invalid key", "echo": "{BODY_SENTINEL}"}}'.encode()


def _raise_from_none() -> None:
    try:
        raise RuntimeError(f"401 from upstream, Authorization: Bearer {KEY_SENTINEL}")
    except RuntimeError:
        raise ProviderError(
            ErrorCategory.AUTHENTICATION,
            401,
            fingerprint=Fingerprint.of(_secret_body()),
            detail="the provider refused the credentials",
            error_type="invalid_api_key",
        ) from None


def _raise_from_clean_cause_inside_secret_handler() -> None:
    try:
        raise RuntimeError(f"Authorization: Bearer {KEY_SENTINEL}")
    except RuntimeError:
        raise ProviderError(
            ErrorCategory.INVALID_RESPONSE,
            200,
            fingerprint=Fingerprint.of(_secret_body()),
        ) from ValueError("response body is not JSON")


def _raise_from_clean_cause() -> None:
    raise ProviderError(
        "provider_unavailable", 503, 4.0, Fingerprint.of(_secret_body())
    ) from ConnectionError("connection reset")


def _rendered(err: BaseException) -> list[str]:
    return [str(err), repr(err), "".join(traceback.format_exception(err)), repr(err.args)]


@pytest.mark.parametrize(
    "raiser",
    [_raise_from_none, _raise_from_clean_cause_inside_secret_handler, _raise_from_clean_cause],
)
def test_provider_error_never_shows_body_or_key(raiser: Callable[[], None]) -> None:
    with pytest.raises(ProviderError) as caught:
        raiser()
    err = caught.value
    for text in _rendered(err):
        assert BODY_SENTINEL not in text
        assert KEY_SENTINEL not in text
    # The fingerprint summarises the body instead.
    assert err.fingerprint == Fingerprint.of(_secret_body())
    assert f"{len(_secret_body())} bytes" in str(err)


def test_provider_error_traceback_shows_the_clean_cause() -> None:
    with pytest.raises(ProviderError) as caught:
        _raise_from_clean_cause_inside_secret_handler()
    err = caught.value
    assert isinstance(err.__cause__, ValueError)
    assert "response body is not JSON" in "".join(traceback.format_exception(err))


def test_provider_error_from_none_suppresses_the_secret_context() -> None:
    with pytest.raises(ProviderError) as caught:
        _raise_from_none()
    err = caught.value
    assert err.__suppress_context__ is True
    assert err.__cause__ is None


def test_provider_error_attributes_and_message() -> None:
    fp = Fingerprint.of(b"x")
    err = ProviderError(
        "provider_rate_limit", 429, 1.5, fp, detail="quota", error_type="rate_limited"
    )
    assert err.category is ErrorCategory.RATE_LIMIT
    assert (err.status_code, err.retry_after, err.fingerprint) == (429, 1.5, fp)
    assert (err.detail, err.error_type) == ("quota", "rate_limited")
    message = str(err)
    assert message.startswith("provider_rate_limit: HTTP 429")
    assert "retry after 1.5s" in message
    assert fp.sha256[:16] in message
    assert repr(err) == (
        "ProviderError(category='provider_rate_limit', status_code=429, retry_after=1.5)"
    )


def test_provider_error_minimal_message() -> None:
    assert str(ProviderError(ErrorCategory.INVALID_REQUEST)) == "provider_invalid_request"


def test_provider_error_refuses_unknown_category() -> None:
    with pytest.raises(ValueError, match="provider_bogus"):
        ProviderError("provider_bogus")


@pytest.mark.parametrize(
    "err",
    [
        ProviderError(
            ErrorCategory.RATE_LIMIT,
            429,
            12.0,
            Fingerprint.of(b"slow down"),
            detail="limit",
            error_type="rate_limit_exceeded",
        ),
        ProviderError(ErrorCategory.UNAVAILABLE),
        ProviderError("provider_model_not_loaded", 503, None),
    ],
    ids=["full", "bare", "no-retry"],
)
def test_provider_error_pickles(err: ProviderError) -> None:
    again = pickle.loads(pickle.dumps(err))
    assert isinstance(again, ProviderError)
    assert again.category is err.category
    assert again.status_code == err.status_code
    assert again.retry_after == err.retry_after
    assert again.fingerprint == err.fingerprint
    assert again.detail == err.detail
    assert again.error_type == err.error_type
    assert str(again) == str(err)
