r"""The host a URL value reaches, read the way HTTP clients read it, for ``host_in`` rules.

Standard library only, Python 3.9+ (it decides in the sandbox and on the host, with
`runner.wire.argrules`). ``urllib.parse.urlsplit`` reads some URLs unlike the clients a
tool sends with (tests/unit/policy/test_host_rules_parsing.py): in
``http://evil.com\@api.github.com/`` urllib3 (``requests``) and WHATWG URL parsing see the host
``evil.com`` where urlsplit and httpx see ``api.github.com``; ``http://evil%2Ecom/`` is
``evil.com`` to urllib3; ``evil.com\u3002`` (an IDNA full stop) is ``evil.com.`` to httpx.

`url_host` canonicalises the host the way WHATWG URL parsing does for a special scheme
(``http``, ``https``, ``ws``, ``wss``, ``ftp``, ``file``; a value with no scheme is read as
``host[:port][/path]``): ASCII tab and newline removed, C0 controls and spaces stripped from
both ends, ``\`` read as ``/``, any run of slashes after a special scheme, userinfo up to the
last ``@``, the port dropped, the host percent-decoded (UTF-8), the IDNA full stops U+3002,
U+FF0E and U+FF61 mapped to ``.``, lower-cased, one trailing ``.`` dropped.

The result is *clear* only when the host is then plain ASCII LDH labels (letters, digits,
hyphens; 1-63 characters, no leading or trailing hyphen; at most 253 in all) or an IP literal
(a dotted-quad IPv4 address, or a bracketed IPv6 address without a zone), and the clients
cannot read it otherwise: no backslash, percent sign, tab or newline in the authority, at most
one ``@``, exactly two slashes after a special scheme, a numeric port, a last label that is not
a number unless the host is a dotted quad. Anything else is *disputed* (`HostReading.clear`
False): an ``allow`` rule's ``host_in`` never holds for it and a ``deny`` rule's always does
(fail closed), whatever the globs.
"""

import re
from typing import NamedTuple, Optional, Tuple
from urllib.parse import unquote_to_bytes

SPECIAL_SCHEMES = ("http", "https", "ws", "wss", "ftp", "file")
MAX_HOST_CHARS = 253
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")
_LABEL = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\Z")
_NUMERIC_LABEL = re.compile(r"(?:0[xX][0-9A-Fa-f]*|[0-9]+)\Z")
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_IPV4 = re.compile(r"{0}\.{0}\.{0}\.{0}\Z".format(_OCTET))
_PORT = re.compile(r"[0-9]{0,5}\Z")
_IDNA_DOTS = {0x3002: ".", 0xFF0E: ".", 0xFF61: "."}
_EDGE = "".join(chr(c) for c in range(0x21))  # C0 controls and space (WHATWG strips them)


class HostReading(NamedTuple):
    """How a URL value's host reads.

    Attributes:
        host: the canonical host (lower-case; an IPv6 address without brackets), or the best
            reading of a disputed one (for messages); None when the value holds no host.
        clear: True when every client reads this host (see the module docstring).
    """

    host: Optional[str]
    clear: bool


def url_host(value: str) -> HostReading:
    """Read the host of the URL (or ``host[:port][/path]``) ``value`` holds.

    Args:
        value: the argument's text (hostile; the caller bounds its length).

    Returns:
        The reading; ``HostReading(None, True)`` for a value with no authority at all (e.g. a
        ``mailto:`` URL or an empty string), which no ``host_in`` glob matches.
    """
    text = value.strip(_EDGE).replace("\t", "").replace("\n", "").replace("\r", "")
    disputed = len(text) != len(value.strip(_EDGE))
    # The authority read with '\' as '/' (WHATWG, urllib3) and with '\' as data (urlsplit,
    # httpx): two readings that differ are disputed.
    authority, ok = _authority(text.replace("\\", "/"))
    literal, _ = _authority(text)
    if authority is None:
        return HostReading(None, True)
    disputed = disputed or not ok or literal != authority or "\\" in authority
    if authority.count("@") > 1:
        disputed = True
    hostport = authority.rpartition("@")[2]
    host, port_ok = _split_port(hostport)
    disputed = disputed or not port_ok
    canonical, host_ok = _canonical_host(host)
    return HostReading(canonical, host_ok and not disputed)


def _authority(text: str) -> Tuple[Optional[str], bool]:
    """The authority of ``text`` and whether its slashes are the two every client expects."""
    scheme = _SCHEME.match(text)
    ok = True
    if scheme and scheme.group(1).lower() in SPECIAL_SCHEMES:
        rest = text[scheme.end() :]
        slashes = len(rest) - len(rest.lstrip("/"))
        ok = slashes == 2
        rest = rest.lstrip("/")
    elif scheme and text[scheme.end() :].startswith("//"):
        rest = text[scheme.end() + 2 :]  # another scheme's authority (git://host/...)
    elif text.startswith("//"):
        rest = text[2:]
    elif scheme and not text[scheme.end() :][:1].isdigit():
        return None, True  # mailto:x@y and the like: no host (host:port is read below)
    else:
        rest = text  # host[:port][/path]
    end = len(rest)
    for stop in "/?#":
        found = rest.find(stop)
        if found != -1:
            end = min(end, found)
    return rest[:end], ok


def _split_port(hostport: str) -> Tuple[str, bool]:
    if hostport.startswith("["):
        close = hostport.find("]")
        if close == -1:
            return hostport, False
        tail = hostport[close + 1 :]
        ok = tail == "" or (tail.startswith(":") and bool(_PORT.match(tail[1:])))
        return hostport[: close + 1], ok
    host, colon, port = hostport.partition(":")
    return host, not colon or bool(_PORT.match(port))


def _canonical_host(host: str) -> Tuple[Optional[str], bool]:
    import ipaddress  # here: ~2 ms of every sandbox's start otherwise

    if host.startswith("["):
        try:
            address = ipaddress.IPv6Address(host[1:-1])  # a zone (%25eth0) is refused here
        except ValueError:
            return host.lower(), False
        return address.compressed, "%" not in host
    clear = "%" not in host
    try:
        decoded = unquote_to_bytes(host).decode("utf-8") if not clear else host
    except UnicodeDecodeError:
        return host.lower(), False
    name = decoded.translate(_IDNA_DOTS).lower()
    if name.endswith("."):
        name = name[:-1]
    if not name or len(name) > MAX_HOST_CHARS or not name.isascii():
        return name or None, False
    labels = name.split(".")
    if _NUMERIC_LABEL.match(labels[-1]):  # WHATWG reads the host as an IPv4 number
        return name, clear and bool(_IPV4.match(name))
    return name, clear and all(_LABEL.match(label) for label in labels)
