"""`runner.wire.urlhost.url_host`: the host a URL reaches, canonical or disputed."""

from __future__ import annotations

import pytest

from runner.wire.argrules import RuleSet
from runner.wire.urlhost import HostReading, url_host

CLEAR = [
    ("https://api.github.com/repos", "api.github.com"),
    ("HTTP://API.GitHub.com./x", "api.github.com"),
    ("http://api.github.com@evil.com/", "evil.com"),
    ("http://evil.com#@api.github.com", "evil.com"),
    ("http://evil.com\u3002/", "evil.com"),
    ("http://evil\uff0ecom\uff61/", "evil.com"),
    ("api.github.com:443/x", "api.github.com"),
    ("http://[::1]:8080/", "::1"),
    ("http://127.0.0.1/", "127.0.0.1"),
    ("git://host.example/y", "host.example"),
]
DISPUTED = [
    "http://evil.com\\@api.github.com/",  # urllib3 and WHATWG: evil.com; httpx: api.github.com
    "http:\\\\evil.com/",
    "http://evil%2Ecom/",  # urllib3: evil.com; httpx: evil%2ecom
    "http://0x7f.1/",  # WHATWG: 127.0.0.1
    "http://2130706433/",
    "http:/evil.com",  # WHATWG: evil.com; urlsplit: no host
    "http:evil.com",
    "http://a@b@c/",
    "http://\uff45vil.com/",  # fullwidth e: IDNA maps it to evil.com
    "http://ev\til.com/",
    "http://evil.com:8x/",
    "http://[::1%25eth0]/",
    "not a url",
]


@pytest.mark.parametrize(("url", "host"), CLEAR)
def test_clear_hosts_are_canonical(url: str, host: str) -> None:
    assert url_host(url) == HostReading(host, True)


@pytest.mark.parametrize("url", DISPUTED)
def test_disputed_hosts_hold_for_deny_never_for_allow(url: str) -> None:
    assert not url_host(url).clear
    rules = [
        {"name": "a", "tool": "t", "action": "allow", "when": {"u": {"host_in": ["*"]}}},
    ]
    assert not RuleSet.from_json(rules).decide("t", {"u": url}).allowed
    rules[0]["action"] = "deny"
    rules[0]["when"] = {"u": {"host_in": ["nothing.invalid"]}}
    decision = RuleSet.from_json(rules).decide("t", {"u": url})
    assert not decision.allowed and decision.matched, decision.to_json()


def test_a_value_with_no_authority_has_no_host() -> None:
    assert url_host("mailto:a@b.example") == HostReading(None, True)
