"""Attack test: ``host_in`` argument rules read a URL's host unlike the HTTP clients.

`runner.wire.argrules._host` takes the host from ``urllib.parse.urlsplit``. The clients a
tool uses read some URLs differently, so an allow list (``host_in: [api.github.com]``) lets a
call through that goes elsewhere, and a deny rule (``host_in: [evil.com]``) misses a call that
goes there. The same evaluator decides in the sandbox (the guard) and on the host
(``policy diff``, ``check``), so both are wrong the same way. Measured here:

======================================  ==================  ===============  ==============
URL                                     rule's host         httpx            urllib3
======================================  ==================  ===============  ==============
``http://evil.com\\@api.github.com/``   api.github.com      api.github.com   evil.com
``http://evil%2Ecom/``                  evil%2ecom          evil%2ecom       evil.com
``http://evil.com\\u3002/``             evil.com\\u3002     evil.com.        (refused)
======================================  ==================  ===============  ==============

(urllib3 is what ``requests`` sends with.) The network is absent in a sandbox, so the damage is
contained there; what is wrong is the decision itself (an allowed call in the trace and in
``policy diff`` that went to another host). Fail closed would be: a value whose host parsers
could disagree on (a backslash or ``%`` in the authority, a non-ASCII host, an IDNA dot) is
not matched by an ``allow`` and is matched by a ``deny``.
"""

from __future__ import annotations

import urllib3.util

from runner.wire.argrules import RuleSet

ALLOW_GITHUB = RuleSet.from_json(
    [
        {
            "name": "github-only",
            "tool": "http.get",
            "action": "allow",
            "when": {"url": {"host_in": ["api.github.com"]}},
        }
    ]
)
DENY_EVIL = RuleSet.from_json(
    [
        {
            "name": "no-evil",
            "tool": "http.get",
            "action": "deny",
            "when": {"url": {"host_in": ["evil.com"]}},
        }
    ]
)


def test_control_the_plain_urls_are_decided_as_documented() -> None:
    assert ALLOW_GITHUB.decide("http.get", {"url": "https://api.github.com/repos"}).allowed
    assert not ALLOW_GITHUB.decide("http.get", {"url": "https://evil.com/"}).allowed
    assert not DENY_EVIL.decide("http.get", {"url": "http://EVIL.com./x"}).allowed
    assert not ALLOW_GITHUB.decide("http.get", {"url": "http://api.github.com@evil.com/"}).allowed


def test_an_allow_list_does_not_pass_a_backslash_authority() -> None:
    url = "http://evil.com\\@api.github.com/"
    assert urllib3.util.parse_url(url).host == "evil.com"  # where requests would connect
    decision = ALLOW_GITHUB.decide("http.get", {"url": url})
    assert not decision.allowed, decision.to_json()


def test_a_deny_rule_catches_a_percent_encoded_host() -> None:
    url = "http://evil%2Ecom/"
    assert urllib3.util.parse_url(url).host == "evil.com"
    decision = DENY_EVIL.decide("http.get", {"url": url})
    assert not decision.allowed, decision.to_json()


def test_a_deny_rule_catches_an_idna_dot() -> None:
    import httpx

    url = "http://evil.com\u3002/"
    assert httpx.URL(url).host.rstrip(".") == "evil.com"
    decision = DENY_EVIL.decide("http.get", {"url": url})
    assert not decision.allowed, decision.to_json()
