"""Credentials out of URLs, wherever a URL may be shown: logs, errors, the status ConfigMap.

A git remote often carries its credentials in the URL's user part: `https://TOKEN@host/...`,
`https://x-access-token:TOKEN@github.com/...`, `https://TOKEN:x-oauth-basic@github.com/...`.
Any of its halves may be the secret, so the whole user part is hidden, except for ssh, whose
user (`ssh://git@host/...`) is a login name and whose credentials are keys, never in the URL.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

HIDDEN = "***"
# A URL inside free text (git quotes them: 'https://...'); it ends at a space or a quote.
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")
_SSH_SCHEMES = frozenset({"ssh", "git+ssh", "ssh+git"})


def redacted(url: str) -> str:
    """The URL without credentials: its user part hidden (ssh: its password only)."""
    try:
        parts = urlsplit(url)
    except ValueError:  # not a URL after all (a bad IPv6 literal): hide what may be a secret
        return _hide_userinfo_by_hand(url)
    userinfo, at, hostinfo = parts.netloc.rpartition("@")
    if not at:
        return url
    if parts.scheme.lower() in _SSH_SCHEMES:
        user, colon, _ = userinfo.partition(":")
        shown = f"{user}:{HIDDEN}" if colon else user
    else:
        shown = HIDDEN
    return urlunsplit(parts._replace(netloc=f"{shown}@{hostinfo}"))


def redacted_text(text: str) -> str:
    """`text` with every URL in it redacted; spaces and line breaks are kept."""
    return _URL_IN_TEXT.sub(lambda found: redacted(found.group(0)), text)


def _hide_userinfo_by_hand(url: str) -> str:
    scheme, sep, rest = url.partition("://")
    authority, slash, path = rest.partition("/")
    if not sep or "@" not in authority:
        return url
    return f"{scheme}://{HIDDEN}@{authority.rpartition('@')[2]}{slash}{path}"
