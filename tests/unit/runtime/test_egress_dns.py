"""The egress witness's reading of name lookups (`runner.runtime.egress.dns`): hostile bytes."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from runner.runtime.egress import dns


def _query(name: bytes, flags: int = 0x0100, counts: tuple[int, ...] = (1, 0, 0, 0)) -> bytes:
    labels = b"".join(bytes([len(p)]) + p for p in name.split(b".")) + b"\0"
    return struct.pack("!HH4H", 0x1234, flags, *counts) + labels + struct.pack("!HH", 1, 1)


def test_a_query_gives_its_name_and_a_refused_answer() -> None:
    query = _query(b"New-Dependency.invalid")
    assert dns.question_name(query) == "New-Dependency.invalid"
    answer = dns.refused(query + b"\0\0)")  # an EDNS record after the question is left out
    assert answer is not None
    query_id, flags, qd, an, ns, ar = struct.unpack_from("!HH4H", answer, 0)
    assert (query_id, flags & 0x800F, qd, an, ns, ar) == (0x1234, 0x8005, 1, 0, 0, 0)
    assert flags & 0x0100  # recursion desired, as asked
    assert answer[12:] == query[12:]


@pytest.mark.parametrize(
    "payload",
    [
        b"",
        b"\0" * 11,
        _query(b"a.invalid", flags=0x8100),  # a response
        _query(b"a.invalid", flags=0x2900),  # opcode 5 (update)
        _query(b"a.invalid", counts=(2, 0, 0, 0)),
        _query(b"a.invalid", counts=(1, 1, 0, 0)),
        _query(b"a.invalid")[:-1],  # QCLASS cut
        _query(b"a.inv\x00lid"),  # a NUL in a label
        _query(b"a.inv lid"),  # a space
        _query(b"a.inv\xffalid"),
        _query(b"x" * 64),  # a label too long
        _query(b".".join([b"a" * 63] * 4)),  # a name too long (255)
        struct.pack("!HH4H", 1, 0, 1, 0, 0, 0) + b"\xc0\x0c" + b"\0\1\0\1",  # compression
        struct.pack("!HH4H", 1, 0, 1, 0, 0, 0) + b"\0" + b"\0\1\0\1",  # the root alone
        struct.pack("!HH4H", 1, 0, 1, 0, 0, 0) + b"\x05ab",  # a label cut
    ],
)
def test_anything_but_a_strict_query_is_no_lookup(payload: bytes) -> None:
    assert dns.question_name(payload) is None
    assert dns.refused(payload) is None


def test_nameservers_are_read_strictly(tmp_path: Path) -> None:
    conf = tmp_path / "resolv.conf"
    conf.write_text(
        "# comment\nsearch example.com\nnameserver 10.255.255.53\nnameserver  fd00::0:53\n"
        "nameserver not-an-address\nnameserver\nnameserver 1.2.3.4.5\noptions ndots:1\n"
    )
    assert dns.nameservers(str(conf)) == {"10.255.255.53", "fd00::53"}
    assert dns.nameservers(str(tmp_path / "missing")) == frozenset()
    conf.write_text("nameserver 10.255.255.53\noptions ndots:2 use-vc\n")
    assert dns.nameservers(str(conf)) == frozenset()  # TCP queries: no swap, logged by address


def test_the_resolver_knows_only_the_nameservers_port_53() -> None:
    resolver = dns.Resolver(lambda _: None, frozenset({"10.255.255.53"}))
    try:
        assert resolver.is_server({"family": "inet", "address": "10.255.255.53", "port": 53})
        assert not resolver.is_server({"family": "inet", "address": "10.255.255.53", "port": 54})
        assert not resolver.is_server({"family": "inet", "address": "10.255.255.54", "port": 53})
        assert not resolver.is_server({"family": "unix", "address": "10.255.255.53", "port": 53})
        assert len(resolver.address()) == 16  # a whole sockaddr_in
    finally:
        resolver.close()


def test_a_resolv_conf_without_nameservers_means_the_resolvers_loopback_default(
    tmp_path: Path,
) -> None:
    """glibc, musl and Go query 127.0.0.1 (Go also ::1) when the file names no nameserver.

    The namespace backend's root filesystem (exported from the image) has an empty
    ``/etc/resolv.conf``: a plain ``getaddrinfo`` there was logged as ``connect 127.0.0.1:53
    (denied)`` beside its ``dns`` entry, so an ``--egress-baseline`` written on the Docker
    backend (which names a nameserver) failed the same run on the namespace one (review4).
    """
    conf = tmp_path / "resolv.conf"
    conf.write_text("")
    assert dns.nameservers(str(conf)) == {"127.0.0.1", "::1"}
    conf.write_text("# nothing\nsearch example.com\noptions ndots:1\n")
    assert dns.nameservers(str(conf)) == {"127.0.0.1", "::1"}
    conf.write_text("options use-vc\n")
    assert dns.nameservers(str(conf)) == frozenset()  # TCP queries: still no swap
