"""What ``reproduce`` is given: trace files, folders of traces, reviewer packets.

- `expand_inputs` turns the command's arguments into a list of traces and packets, checking
  that every one exists *before* anything runs or is created (a missing trace fails at once);
- `safe_extract` unpacks a reviewer packet (``.tar.gz``) into a fresh folder, every member
  name turned into a path by `runner.domain.ids.path_under` (no absolute path, no ``..``, no
  invalid or over-long name), refusing links, devices, oversized members, duplicates and
  names that are both a file and a folder, all before anything is written;
- `find_workflow_file` finds the workflow file a trace ran: the file given with
  ``--workflow``, else a YAML file beside the trace (or one folder up, or in the current
  directory) whose sha256 is the trace's recorded workflow hash, so that its tool modules
  resolve from their real folder. None when there is no such file: the caller then writes the
  trace's own copy of the workflow to a scratch folder;
- `tool_folder` is the one folder a trace's tool entries then resolve in: never the current
  directory as such, never the installed packages (item 12).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import tarfile
from pathlib import Path

from runner.domain.ids import collision_key, path_under
from runner.domain.words import counted
from runner.errors import InputError
from runner.inputfile import open_input, read_input
from runner.reproduce.tarscan import scan_headers
from runner.trace.format import text_hash

PACKET_SUFFIXES = (".tar.gz", ".tgz")
TRACE_SUFFIXES = (".jsonl",)
MAX_PACKET_MEMBER_BYTES = 256 * 1024 * 1024
MAX_PACKET_BYTES = 1024 * 1024 * 1024
"""All members of one packet together, unpacked (bytes)."""
MAX_PACKET_MEMBERS = 10000
# What this file system says of a member name it cannot hold (checked names rarely reach it).
_NAME_ERRNOS = frozenset(
    {errno.EEXIST, errno.EISDIR, errno.ENOTDIR, errno.ENAMETOOLONG, errno.EINVAL, errno.EILSEQ}
)


def is_packet(path: Path) -> bool:
    """True for a reviewer packet file name."""
    return path.name.endswith(PACKET_SUFFIXES)


def _is_input(path: Path) -> bool:
    return path.name.endswith(TRACE_SUFFIXES) or is_packet(path)


def expand_inputs(arguments: list[Path], *, skipped: list[Path] | None = None) -> list[Path]:
    """Every trace or packet the arguments name, in order; folders give their files, sorted.

    A folder's files that are neither traces (``*.jsonl``) nor packets are skipped, and so are
    such files among several arguments (``reproduce traces/*`` names the folder's
    ``tools.manifest.json`` too), and folders holding neither among several arguments; one file
    named alone is taken as it is (refused by name when it is no trace). A folder's entries
    named as traces or packets are taken whatever they are (a FIFO, a dangling link): the
    bounded reader refuses them by name, as when they are named one by one.

    Args:
        arguments: the command's paths.
        skipped: when given, each skipped file is appended to it (the command says how many).

    Raises:
        InputError: an argument that does not exist, a folder holding no trace or packet, or
            arguments that name no trace or packet at all (only skipped files).
    """
    found: list[Path] = []
    passed: list[Path] = []
    for argument in arguments:
        if argument.is_dir():
            # every entry but folders: a FIFO or a dangling link named ``x.jsonl`` is refused by
            # the bounded reader beside the others, as when the glob names it, never dropped
            files = sorted(p for p in argument.iterdir() if not p.is_dir())
            inside = [p for p in files if _is_input(p)]
            if not inside and len(arguments) > 1:  # `traces/*` naming an `old/` folder of notes
                passed.append(argument)
                continue
            if not inside:
                raise InputError("folder holds no traces (*.jsonl) or packets", file=str(argument))
            found.extend(inside)
            passed.extend(p for p in files if not _is_input(p))
        elif argument.exists():  # a FIFO or a device too: the bounded reader refuses it by name
            if len(arguments) > 1 and not _is_input(argument):
                passed.append(argument)
            else:
                found.append(argument)
        else:
            raise InputError("no such trace, folder or packet", file=str(argument))
    if not found:
        raise InputError(
            "no traces (*.jsonl) or packets among the arguments"
            f" ({counted(len(passed), 'other file')})"
        )
    if skipped is not None:
        skipped.extend(passed)
    return found


def safe_extract(packet: Path, destination: Path) -> None:
    """Unpack ``packet`` into the empty folder ``destination``, safely.

    Every member name becomes a path only through `runner.domain.ids.path_under` (each part a
    valid id: no absolute path, no ``..``, no part over `runner.domain.ids.MAX_ID_LENGTH`
    characters, no device name). All members are checked before anything is written, so a
    refused packet leaves ``destination`` empty.

    Raises:
        InputError: not a readable gzip tar (or not a regular file, or larger than
            ``runner.inputfile.LIMITS["packet"]``), or a member with an absolute path, ``..``,
            an invalid or too long name, a link, a device or FIFO, more than
            `MAX_PACKET_MEMBER_BYTES`, members together over `MAX_PACKET_BYTES`, too many
            members, a name listed twice (also differing only in case: one file on macOS and
            Windows), or a name that is both a file and a folder (the member is named; nothing
            outside ``destination`` is ever written).
    """
    stream = open_input(packet, "packet")  # regular files only, at most LIMITS["packet"]
    try:
        # every header checked as it streams, before tarfile reads (and holds) any of it
        scan_headers(
            stream,
            str(packet),
            max_members=MAX_PACKET_MEMBERS,
            max_member_bytes=MAX_PACKET_MEMBER_BYTES,
            max_total_bytes=MAX_PACKET_BYTES,
        )
        stream.seek(0)
        archive = tarfile.open(fileobj=stream, mode="r:gz")  # noqa: SIM115 - closed below
    except InputError:
        stream.close()
        raise
    except (tarfile.TarError, OSError, EOFError) as exc:
        stream.close()
        raise InputError(
            f"not a readable reviewer packet (.tar.gz): {exc}", file=str(packet)
        ) from exc
    with stream, archive:
        members = _members(archive, packet)
        plan = _plan(members, destination, packet)
        for member, target in plan:
            try:
                _write_member(archive, member, target, packet)
            except OSError as exc:
                if exc.errno not in _NAME_ERRNOS:
                    raise
                raise InputError(
                    f"member {member.name[:80]!r} cannot be written here: {exc.strerror}",
                    file=str(packet),
                ) from exc


def _members(archive: tarfile.TarFile, packet: Path) -> list[tarfile.TarInfo]:
    """The archive's members read one header at a time, each limit checked as it is read."""
    members: list[tarfile.TarInfo] = []
    try:
        while (member := archive.next()) is not None:
            if len(members) == MAX_PACKET_MEMBERS:
                raise InputError(f"more than {MAX_PACKET_MEMBERS} members", file=str(packet))
            if member.size > MAX_PACKET_MEMBER_BYTES:  # refused before its data is skipped
                raise InputError(
                    f"member {member.name[:80]!r}: larger than the member limit", file=str(packet)
                )
            members.append(member)
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise InputError(f"damaged packet: {exc}", file=str(packet)) from exc
    return members


def _write_member(
    archive: tarfile.TarFile, member: tarfile.TarInfo, target: Path, packet: Path
) -> None:
    if member.isdir():
        target.mkdir(parents=True, exist_ok=True)
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        source = archive.extractfile(member)
        if source is None:
            raise InputError(f"member {member.name[:80]!r}: unreadable", file=str(packet))
        with source, open(target, "xb") as handle:
            while chunk := source.read(1 << 20):
                handle.write(chunk)
    except (tarfile.TarError, EOFError) as exc:
        raise InputError(f"damaged packet: {exc}", file=str(packet)) from exc


def _plan(
    members: list[tarfile.TarInfo], destination: Path, packet: Path
) -> list[tuple[tarfile.TarInfo, Path]]:
    """Each member with its target path, every rule of `safe_extract` checked first."""
    files: dict[str, str] = {}  # collision key -> name, for regular files
    folders: dict[str, str] = {}  # collision key -> name, for folders (listed or implied)
    plan: list[tuple[tarfile.TarInfo, Path]] = []
    unpacked = 0
    for member in members:
        shown = member.name if len(member.name) <= 80 else member.name[:80] + "..."
        where = f"member {shown!r}"
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
        target = path_under(
            destination, member.name, kind="packet member", within="the packet", file=str(packet)
        )
        parts = [p for p in member.name.split("/") if p not in ("", ".")]
        if member.isfile() and not parts:
            raise InputError(f"{where}: a file needs a name", file=str(packet))
        for depth in range(1, len(parts) + (1 if member.isdir() else 0)):
            key = collision_key("/".join(parts[:depth]))
            if key in files:
                raise InputError(
                    f"{where}: {files[key]!r} is a file, so it cannot also be a folder",
                    file=str(packet),
                )
            folders.setdefault(key, "/".join(parts[:depth]))
        if member.isfile():
            key = collision_key("/".join(parts))
            if key in folders:
                raise InputError(
                    f"{where}: {folders[key]!r} is a folder, so it cannot also be a file",
                    file=str(packet),
                )
            if key in files:
                same = files[key] == "/".join(parts)
                raise InputError(
                    f"{where}: listed twice"
                    if same
                    else f"{where}: the same file as {files[key]!r} on macOS and Windows "
                    "(names differing only in case)",
                    file=str(packet),
                )
            files[key] = "/".join(parts)
        plan.append((member, target))
    return plan


def packet_trace(folder: Path, packet: Path) -> Path:
    """The trace inside an unpacked packet (``trace.jsonl``).

    Raises:
        InputError: the packet holds no ``trace.jsonl``.
    """
    trace = folder / "trace.jsonl"
    if not trace.is_file():
        raise InputError("the packet holds no trace.jsonl", file=str(packet))
    return trace


def _hashes(path: Path) -> set[str]:
    """The hashes a workflow file may have been recorded under (empty: no candidate).

    `runner.trace.format.text_hash` (line endings made LF: a CRLF checkout matches a trace
    recorded on Linux), and the sha256 of the exact bytes that traces recorded from a CRLF
    file before line endings were normalised carry.
    """
    try:  # a FIFO or a huge file beside the trace is no candidate (and no hang)
        data = read_input(path, "workflow")
    except InputError:
        return set()
    found = {hashlib.sha256(data).hexdigest()}
    with contextlib.suppress(UnicodeDecodeError):
        found.add(text_hash(data.decode("utf-8")))
    return found


def find_workflow_file(trace: Path, workflow_hash: str, extra: list[Path]) -> Path | None:
    """A YAML file whose hash is ``workflow_hash`` (`_hashes`), near the trace or in ``extra``.

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
            if is_yaml and workflow_hash in _hashes(candidate):
                return candidate
    return None


def recorded_workflow_file(
    trace: Path, workflow_hash: str, state_dir_name: str = ".sandbox-replay"
) -> Path | None:
    """The workflow file a trace ran, found by its hash (`find_workflow_file`), or None.

    Looks beside the trace, one folder up, in a packet's ``workflow/``, then in the current
    directory and in the project of a trace kept in a state folder (`project_of`).
    """
    project = project_of(trace, state_dir_name)
    extra = [Path.cwd(), *([project] if project is not None else [])]
    return find_workflow_file(trace, workflow_hash, extra)


def tool_folder(workflow_file: Path | None, trace: Path, *, packet: bool = False) -> Path:
    """The one folder the ``tools`` entries of a trace's workflow resolve in.

    Args:
        workflow_file: the file found by the trace's workflow hash (`recorded_workflow_file`),
            or None when the trace's own copy of the workflow is used.
        trace: the trace file.
        packet: the trace is a packet's (unpacked): its code sits in the packet's
            ``workflow/`` folder.

    Returns:
        The found file's folder (it holds exactly the trace's workflow, so its entries
        resolve beside it), else the trace's folder (a packet's ``workflow/`` folder when it
        has one): never the current directory as such, never the installed packages
        (`runner.tools.locate.locate_tools`). The user's own ``--workflow`` is
        not a trace's: callers resolve it as ``check`` does.
    """
    if workflow_file is not None:
        return workflow_file.resolve().parent
    folder = trace.resolve().parent
    if packet and (folder / "workflow").is_dir():
        return folder / "workflow"
    return folder


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
