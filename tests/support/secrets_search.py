"""Search files for secrets in every form a trace or packet could hold them.

A secret must not appear as raw bytes, JSON-escaped (``ensure_ascii`` on and off, escaped
twice for a JSON text inside a JSON string, ``\\/`` for a slash) or base64 (of the secret at
each of the three byte alignments inside a longer base64 text, and inside every base64 body of
a trace line, decoded).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import tarfile
from pathlib import Path

# Made-up secrets of the documented shapes (none is a real credential).
OPENAI_KEY = "sk-proj-Zq3T9xVbN2mKp7LwRr4sYd8HfJc1GeA6uQo5"
AWS_KEY_ID = "AKIAIOSFODNN7EXAMPLE"  # AWS's documented example access key id
SSN = "078-05-1120"  # the SSN printed on a 1938 wallet insert: famous, invalid for use
SECRETS = (OPENAI_KEY, AWS_KEY_ID, SSN)
SSN_RULE = {"name": "ssn", "regex": r"\b\d{3}-\d{2}-\d{4}\b"}


def forms(secret: str) -> list[bytes]:
    """Every byte string under which ``secret`` could be stored."""
    out = {secret.encode()}
    for ascii_only in (True, False):
        once = json.dumps(secret, ensure_ascii=ascii_only)[1:-1]
        out.add(once.encode())
        out.add(json.dumps(once, ensure_ascii=ascii_only)[1:-1].encode())
        out.add(once.replace("/", "\\/").encode())
    raw = secret.encode()
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + raw)
        start = (shift * 4 + 2) // 3 + (1 if shift else 0)  # first char not touched by padding
        out.add(encoded[start : len(encoded) - 4])  # a middle run that only the secret decides
    return sorted(f for f in out if len(f) >= 8)


def _base64_bodies(data: bytes) -> list[bytes]:
    bodies = []
    for line in data.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        stack = [record]
        while stack:
            item = stack.pop()
            if isinstance(item, dict):
                if item.get("body_encoding") == "base64" and isinstance(item.get("body"), str):
                    with contextlib.suppress(binascii.Error):
                        bodies.append(base64.b64decode(item["body"], validate=True))
                stack.extend(item.values())
            elif isinstance(item, list):
                stack.extend(item)
    return bodies


def found_in(data: bytes, secrets: tuple[str, ...] = SECRETS) -> list[str]:
    """The secrets (with the form) that occur in ``data`` or in a base64 body it holds."""
    hits = []
    blobs = [data, *_base64_bodies(data)]
    for secret in secrets:
        for form in forms(secret):
            if any(form in blob for blob in blobs):
                hits.append(f"{secret!r} as {form!r}")
    return hits


def found_in_tree(root: Path, secrets: tuple[str, ...] = SECRETS) -> list[str]:
    """`found_in` over every file under ``root`` (and every member of a .tar.gz there)."""
    hits = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        hits += [f"{path}: {hit}" for hit in found_in(path.read_bytes(), secrets)]
        if path.name.endswith(".tar.gz"):
            with tarfile.open(path) as archive:
                for member in archive.getmembers():
                    handle = archive.extractfile(member)
                    if handle is not None:
                        data = handle.read()
                        hits += [f"{path}:{member.name}: {h}" for h in found_in(data, secrets)]
    return hits
