"""What ``reproduce`` is given: trace files, folders of traces, reviewer packets.

- `expand_inputs` turns the command's arguments into a list of traces and packets, checking
  that every one exists *before* anything runs or is created (a missing trace fails at once);
- `safe_extract` unpacks a reviewer packet (``.tar.gz``) into a fresh folder, refusing
  absolute paths, ``..``, links, devices and oversized members (no path traversal);
- `find_workflow_file` finds the workflow file a trace ran: the file given with
  ``--workflow``, else a YAML file beside the trace (or one folder up, or in the current
  directory) whose sha256 is the trace's recorded workflow hash, so that its tool modules
  resolve from their real folder. None when there is no such file: the caller then writes the
  trace's own copy of the workflow to a scratch folder.
"""

from __future__ import annotations

import hashlib
import tarfile
from pathlib import Path, PurePosixPath

from runner.errors import InputError
from runner.inputfile import open_input, read_input

PACKET_SUFFIXES = (".tar.gz", ".tgz")
TRACE_SUFFIXES = (".jsonl",)
MAX_PACKET_MEMBER_BYTES = 256 * 1024 * 1024
MAX_PACKET_BYTES = 1024 * 1024 * 1024
"""All members of one packet together, unpacked (bytes)."""
MAX_PACKET_MEMBERS = 10000


def is_packet(path: Path) -> bool:
    """True for a reviewer packet file name."""
    return path.name.endswith(PACKET_SUFFIXES)


def expand_inputs(arguments: list[Path]) -> list[Path]:
    """Every trace or packet the arguments name, in order; folders give their files, sorted.

    Raises:
        InputError: an argument that does not exist, a file that is neither ``.jsonl`` nor a
            packet, or a folder holding none.
    """
    found: list[Path] = []
    for argument in arguments:
        if argument.is_dir():
            inside = sorted(
                p
                for p in argument.iterdir()
                if p.is_file() and (p.name.endswith(TRACE_SUFFIXES) or is_packet(p))
            )
            if not inside:
                raise InputError("folder holds no traces (*.jsonl) or packets", file=str(argument))
            found.extend(inside)
        elif argument.exists():  # a FIFO or a device too: the bounded reader refuses it by name
            found.append(argument)
        else:
            raise InputError("no such trace, folder or packet", file=str(argument))
    return found


def safe_extract(packet: Path, destination: Path) -> None:
    """Unpack ``packet`` into the empty folder ``destination``, safely.

    Raises:
        InputError: not a readable gzip tar (or not a regular file, or larger than
            ``runner.inputfile.LIMITS["packet"]``), or a member with an absolute path, ``..``,
            a link, a device or FIFO, more than `MAX_PACKET_MEMBER_BYTES`, members together
            over `MAX_PACKET_BYTES`, or too many members (the member is named; nothing
            outside ``destination`` is ever written).
    """
    stream = open_input(packet, "packet")  # regular files only, at most LIMITS["packet"]
    try:
        archive = tarfile.open(fileobj=stream, mode="r:gz")  # noqa: SIM115 - closed below
    except (tarfile.TarError, OSError, EOFError) as exc:
        stream.close()
        raise InputError(
            f"not a readable reviewer packet (.tar.gz): {exc}", file=str(packet)
        ) from exc
    unpacked = 0
    with stream, archive:
        try:
            members = archive.getmembers()
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise InputError(f"damaged packet: {exc}", file=str(packet)) from exc
        if len(members) > MAX_PACKET_MEMBERS:
            raise InputError(f"more than {MAX_PACKET_MEMBERS} members", file=str(packet))
        root = destination.resolve()
        for member in members:
            name = PurePosixPath(member.name)
            where = f"member {member.name!r}"
            if name.is_absolute() or ".." in name.parts or "\\" in member.name:
                raise InputError(f"{where}: path leaves the packet", file=str(packet))
            if not (member.isfile() or member.isdir()):
                raise InputError(f"{where}: links and special files are refused", file=str(packet))
            if member.size > MAX_PACKET_MEMBER_BYTES:
                raise InputError(f"{where}: larger than the member limit", file=str(packet))
            unpacked += member.size
            if unpacked > MAX_PACKET_BYTES:  # a small gzip can unpack to terabytes
                raise InputError(
                    f"{where}: the members unpack to more than {MAX_PACKET_BYTES} bytes",
                    file=str(packet),
                )
            target = (root / name).resolve()
            if target != root and root not in target.parents:
                raise InputError(f"{where}: path leaves the packet", file=str(packet))
            if member.isdir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            source = archive.extractfile(member)
            if source is None:
                raise InputError(f"{where}: unreadable", file=str(packet))
            with source, open(target, "wb") as handle:
                while chunk := source.read(1 << 20):
                    handle.write(chunk)


def packet_trace(folder: Path, packet: Path) -> Path:
    """The trace inside an unpacked packet (``trace.jsonl``).

    Raises:
        InputError: the packet holds no ``trace.jsonl``.
    """
    trace = folder / "trace.jsonl"
    if not trace.is_file():
        raise InputError("the packet holds no trace.jsonl", file=str(packet))
    return trace


def _sha256(path: Path) -> str | None:
    try:  # a FIFO or a huge file beside the trace is no candidate (and no hang)
        return hashlib.sha256(read_input(path, "workflow")).hexdigest()
    except InputError:
        return None


def find_workflow_file(trace: Path, workflow_hash: str, extra: list[Path]) -> Path | None:
    """A YAML file whose sha256 is ``workflow_hash``, near the trace or in ``extra`` folders.

    Looks in the trace's folder, its parent, its ``workflow/`` subfolder (packets) and
    ``extra`` (e.g. the current directory), non-recursively.
    """
    folder = trace.resolve().parent
    places = [folder / "workflow", folder, folder.parent, *extra]
    seen: set[Path] = set()
    for place in places:
        if place in seen or not place.is_dir():
            continue
        seen.add(place)
        for candidate in sorted(place.iterdir()):
            is_yaml = candidate.suffix in (".yaml", ".yml") and candidate.is_file()
            if is_yaml and _sha256(candidate) == workflow_hash:
                return candidate
    return None


def project_of(trace: Path, state_dir_name: str = ".sandbox-replay") -> Path | None:
    """The project folder of a trace kept in a state folder, else None.

    A trace under ``PROJECT/<state dir>/traces/`` (where ``run`` and ``record`` write them)
    belongs to ``PROJECT``: its workflow file and tool modules are there, whatever the
    current directory.

    Args:
        trace: the trace file.
        state_dir_name: the state folder's name (the settings' ``state_dir`` name).
    """
    folder = trace.resolve().parent
    state = folder.parent
    if folder.name == "traces" and state.name in (state_dir_name, ".sandbox-replay"):
        return state.parent
    return None
