"""What the kinds that call a server over HTTP share (the judges' backends, remote reward models): which answers are
worth another try, which say the server refuses us, and how long a Retry-After asks to wait. Not a kind: it exports no
verifiers, and imports nothing of the kinds, so any of them may use it without importing another."""
from __future__ import annotations

import email.utils
import time

import httpx

# Worth another try: rate limits, overload, gateway trouble, request timeouts.
RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
# The backend is misconfigured (bad key, wrong model or path): no answer will come, whatever we send.
REFUSED_STATUS = frozenset({401, 403, 404})


def retry_after(response: httpx.Response) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date)."""
    value = response.headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
