"""Copy mode over a fake engine: the probe, the runtime image, the tool volumes.

The fake stands in for ``docker.APIClient`` and plays an engine that sees this host's files,
one that refuses the bind sources (a remote engine, dind), or one that sees other files under the
same paths. The assertions are on the exact calls: what is mounted how, what is copied with which
owner and modes, what is built from what, and that nothing is copied or built twice.
"""

from __future__ import annotations

import io
import stat
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import docker.errors
import pytest
import requests

from runner.backends import labels as L
from runner.backends.base import Mount, SandboxSpec
from runner.backends.docker import hostfiles as H
from runner.backends.docker.backend import DockerBackend
from runner.backends.docker.filetree import archive, entries_of
from runner.backends.docker.runtimeimage import (
    RUNTIME_LABEL,
    RUNTIME_RECIPE,
    RUNTIME_RECIPE_LABEL,
)
from runner.errors import InfrastructureError
from runner.wire import protocol

OWNER = L.Owner(host="h0st", pid=4242, start="777")
RUNNER = f"{protocol.RUNTIME_ROOT}/runner"


def api_error(status: int, message: str) -> docker.errors.APIError:
    response = requests.Response()
    response.status_code = status
    cls = docker.errors.NotFound if status == 404 else docker.errors.APIError
    return cls(f"{status}", response=response, explanation=message)


def tar_bytes(name: str, content: bytes) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        info = tarfile.TarInfo(name)
        info.size = len(content)
        tar.addfile(info, io.BytesIO(content))
    return out.getvalue()


@dataclass
class Member:
    name: str
    uid: int
    gid: int
    mode: int
    type: bytes
    content: bytes


def members(data: Any) -> list[Member]:
    raw = data if isinstance(data, bytes) else data.read()
    found = []
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        for m in tar.getmembers():
            handle = tar.extractfile(m) if m.isfile() else None
            content = handle.read() if handle is not None else b""
            found.append(Member(m.name, m.uid, m.gid, m.mode, m.type, content))
    return found


class FakeEngine:
    """The calls copy mode makes, answered as an engine that ``sees`` host files or not."""

    api_version = "1.41"

    def __init__(self, sees: str = "host") -> None:
        self.sees = sees  # "host": the host's files; "nothing": refuses binds; "other": others
        self.calls: list[tuple[str, Any]] = []
        self.containers: dict[str, dict[str, Any]] = {}
        self.volume_names: set[str] = set()
        self.created: dict[str, str] = {}  # volume -> CreatedAt
        self.in_use: set[str] = set()
        self.images: dict[str, dict[str, Any]] = {
            "sandbox:1": {"Id": "sha256:" + "ab" * 32, "Config": {"User": "10001:10001"}}
        }
        self.puts: list[tuple[str, str, list[Member]]] = []
        self.builds: list[dict[str, Any]] = []

    def create_host_config(self, **kwargs: Any) -> dict[str, Any]:
        return kwargs

    def create_container(self, image: str, **kwargs: Any) -> dict[str, str]:
        self.calls.append(("create_container", kwargs["name"]))
        binds = [m for m in kwargs["host_config"]["mounts"] if m["Type"] == "bind"]
        if binds and self.sees == "nothing":
            raise api_error(
                400, f"invalid mount config: bind source path does not exist: {binds[0]['Source']}"
            )
        cid = f"cid-{len(self.containers)}"
        self.containers[cid] = {"image": image, **kwargs}
        return {"Id": cid}

    def get_archive(self, container: str, path: str) -> tuple[Iterator[bytes], dict[str, Any]]:
        self.calls.append(("get_archive", path))
        mounts = self.containers[container]["host_config"]["mounts"]
        for mount in mounts:
            target = mount["Target"]
            if path == target or path.startswith(target + "/"):
                host = Path(mount["Source"], path[len(target) :].lstrip("/"))
                content = host.read_bytes() if self.sees == "host" else b"the engine's own file"
                return iter([tar_bytes(host.name, content)]), {}
        raise api_error(404, f"no such file {path}")

    def remove_container(self, container: str, force: bool = False) -> None:
        self.calls.append(("remove_container", container))
        self.containers.pop(container, None)

    def inspect_volume(self, name: str) -> dict[str, str]:
        if name not in self.volume_names:
            raise api_error(404, f"no such volume {name}")
        return {"Name": name}

    def create_volume(self, name: str, labels: dict[str, str] | None = None) -> dict[str, str]:
        self.calls.append(("create_volume", name))
        self.volume_names.add(name)
        return {"Name": name}

    def remove_volume(self, name: str) -> None:
        self.calls.append(("remove_volume", name))
        if name in self.in_use:
            raise api_error(409, f"remove {name}: volume is in use")
        self.volume_names.discard(name)

    def volumes(self, filters: Any = None) -> dict[str, Any]:
        assert filters == {"label": [H.FILES_LABEL]}
        listed = [{"Name": n, "CreatedAt": self.created.get(n, "")} for n in self.volume_names]
        return {"Volumes": listed}

    def put_archive(self, container: str, path: str, data: Any) -> bool:
        self.calls.append(("put_archive", path))
        volume = self.containers[container]["host_config"]["mounts"][0]["Source"]
        self.puts.append((volume, path, members(data)))
        return True

    def inspect_image(self, ref: str) -> dict[str, Any]:
        if ref not in self.images:
            raise api_error(404, f"no such image {ref}")
        return self.images[ref]

    def build(self, **kwargs: Any) -> Iterator[dict[str, Any]]:
        self.calls.append(("build", kwargs["tag"]))
        context = members(kwargs["fileobj"])
        kwargs["context"] = context
        self.builds.append(kwargs)
        self.images[kwargs["tag"]] = {
            "Id": "sha256:" + "cd" * 32,
            "Config": {"Labels": dict(kwargs["labels"])},
        }
        yield {"aux": {"ID": "sha256:" + "cd" * 32}}


@pytest.fixture
def project(tmp_path: Path) -> dict[str, Path]:
    package = tmp_path / "site" / "runner"
    for name in protocol.SANDBOX_PACKAGES:
        (package / name / "__pycache__").mkdir(parents=True)
        (package / name / "__init__.py").write_text(f"# {name}\n")
        (package / name / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"stale")
    (package / "__init__.py").write_text('__version__ = "0.1.0"\n')
    tools = tmp_path / "state" / "snapshots" / ("f" * 64) / "0"
    (tools / "pkg").mkdir(parents=True)
    (tools / "my_tools.py").write_text("def t():\n    return 1\n")
    (tools / "pkg" / "run.sh").write_text("#!/bin/sh\n")
    (tools / "pkg" / "run.sh").chmod(0o700)
    return {"package": package, "tools": tools}


def spec_of(project: dict[str, Path]) -> SandboxSpec:
    package = project["package"]
    mounts = [Mount(package / "__init__.py", f"{RUNNER}/__init__.py")]
    mounts += [Mount(package / n, f"{RUNNER}/{n}") for n in protocol.SANDBOX_PACKAGES]
    mounts.append(Mount(project["tools"], f"{protocol.TOOLS_DIR}/0"))
    return SandboxSpec(run_id="r1", image="sandbox:1", command=("python3",), mounts=tuple(mounts))


def files(engine: FakeEngine, mode: H.HostFilesMode = "auto") -> H.HostFiles:
    return H.HostFiles(engine, mode, labels={L.MANAGED: "1", L.SESSION: "s"})


def test_an_engine_that_reads_back_the_host_files_gets_bind_mounts(
    project: dict[str, Path],
) -> None:
    engine = FakeEngine("host")
    placed = files(engine).place(spec_of(project))
    assert placed.image == "sandbox:1"
    assert [(m["Type"], m["Source"], m["Target"], m["ReadOnly"]) for m in placed.mounts] == [
        ("bind", str(m.source), m.target, True) for m in spec_of(project).mounts
    ]
    # the probe: one helper container, created and never started, with every bind read-only
    (probe,) = [c for c in engine.calls if c[0] == "create_container"]
    assert probe[1].startswith("sandbox-replay-probe-")
    read = [c[1] for c in engine.calls if c[0] == "get_archive"]
    assert f"{RUNNER}/__init__.py" in read and f"{protocol.TOOLS_DIR}/0/my_tools.py" in read
    assert ("remove_container", "cid-0") in engine.calls
    assert not engine.volume_names and not engine.builds


@pytest.mark.parametrize(
    ("sees", "why"), [("nothing", "refused to bind"), ("other", "sees another")]
)
def test_an_engine_that_cannot_see_them_gets_the_runtime_image_and_read_only_volumes(
    project: dict[str, Path], sees: str, why: str
) -> None:
    engine = FakeEngine(sees)
    host = files(engine)
    placed = host.place(spec_of(project))
    assert host.visibility is not None and not host.visibility.visible
    assert why in host.visibility.reason
    # the runtime is baked into an image of its own tag, built FROM the sandbox image's id
    (build,) = engine.builds
    assert placed.image == build["tag"]
    assert build["tag"].startswith("sandbox-replay-runtime:" + "ab" * 6 + "-")
    assert (build["network_mode"], build["pull"], build["custom_context"]) == ("none", False, True)
    assert build["labels"][RUNTIME_RECIPE_LABEL] == RUNTIME_RECIPE
    assert build["tag"].endswith(build["labels"][RUNTIME_LABEL][:12])
    context = {m.name: m for m in build["context"]}
    dockerfile = context["Dockerfile"].content.decode()
    assert dockerfile.splitlines()[0] == "FROM sha256:" + "ab" * 32
    assert f"COPY runtime/ {protocol.RUNTIME_ROOT}/" in dockerfile
    assert (
        f"compileall -q {RUNNER}/errors {RUNNER}/runtime {RUNNER}/sdk {RUNNER}/trace" in dockerfile
    )
    assert dockerfile.splitlines()[-1] == "USER 10001:10001"  # the image's own user again
    assert "runtime/runner/__init__.py" in context and "runtime/runner/sdk/__init__.py" in context
    assert not any("__pycache__" in name or name.endswith(".pyc") for name in context)
    # no bind mount is left: the tools are one read-only volume, nothing of the runtime mounted
    (volume,) = placed.mounts
    assert (volume["Type"], volume["Target"], volume["ReadOnly"]) == (
        "volume",
        f"{protocol.TOOLS_DIR}/0",
        True,
    )
    assert volume["VolumeOptions"]["NoCopy"] is True
    # filled through the API: root-owned, folders 0755, files 0644 (0755 when executable)
    ((name, path, copied),) = engine.puts
    assert (name, path) == (volume["Source"], "/fill")
    modes = {m.name: (m.uid, m.gid, stat.S_IMODE(m.mode), m.type) for m in copied}
    assert modes == {
        "my_tools.py": (0, 0, 0o644, tarfile.REGTYPE),
        "pkg": (0, 0, 0o755, tarfile.DIRTYPE),
        "pkg/run.sh": (0, 0, 0o755, tarfile.REGTYPE),
    }
    # the marker volume is made after the copy; the helper container is removed
    order = [c for c in engine.calls if c[0] in ("put_archive", "create_volume")]
    assert order == [
        ("create_volume", volume["Source"]),
        ("put_archive", "/fill"),
        ("create_volume", volume["Source"] + ".filled"),
    ]
    assert not engine.containers


def test_the_copies_are_made_once_and_reused_by_later_sandboxes_and_commands(
    project: dict[str, Path],
) -> None:
    engine = FakeEngine("nothing")
    host = files(engine)
    first = host.place(spec_of(project))
    assert host.place(spec_of(project)) == first
    assert len(engine.puts) == 1 and len(engine.builds) == 1
    later = files(engine, "copy").place(spec_of(project))  # another command, same engine
    assert later == first
    assert len(engine.puts) == 1 and len(engine.builds) == 1
    assert not [c for c in engine.calls if c[1] and str(c[1]).startswith("sandbox-replay-probe")][
        1:
    ]


def test_a_runtime_image_with_another_runtime_is_rebuilt(project: dict[str, Path]) -> None:
    engine = FakeEngine("nothing")
    tag = files(engine).place(spec_of(project)).image
    engine.images[tag]["Config"]["Labels"][RUNTIME_LABEL] = "0" * 64  # someone re-tagged it
    assert files(engine, "copy").place(spec_of(project)).image == tag
    assert len(engine.builds) == 2


def test_a_volume_without_its_marker_is_waited_for_then_filled(
    project: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = FakeEngine("nothing")
    name = files(engine).volume_for("sandbox:1", project["tools"])
    engine.volume_names.discard(name + H.FILLED_SUFFIX)  # its filler died before the marker
    engine.puts.clear()
    monkeypatch.setattr(H, "FILL_WAIT_S", 0.2)
    monkeypatch.setattr(H, "_FILL_POLL_S", 0.05)
    assert files(engine, "copy").volume_for("sandbox:1", project["tools"]) == name
    assert len(engine.puts) == 1 and name + H.FILLED_SUFFIX in engine.volume_names


def test_settings_modes_are_not_probed_and_a_writable_mount_cannot_be_copied(
    project: dict[str, Path],
) -> None:
    engine = FakeEngine("host")
    assert files(engine, "bind").place(spec_of(project)).image == "sandbox:1"
    assert not [c for c in engine.calls if c[0] == "get_archive"]
    spec = spec_of(project)
    writable = SandboxSpec(
        run_id="r2",
        image="sandbox:1",
        command=("python3",),
        mounts=(*spec.mounts, Mount(project["tools"], "/out", read_only=False)),
    )
    with pytest.raises(InfrastructureError, match="writable mount"):
        files(FakeEngine("host"), "copy").place(writable)
    with pytest.raises(ValueError, match="unknown host files mode"):
        H.HostFiles(engine, "mount")  # type: ignore[arg-type]


def test_create_kwargs_in_copy_mode_carry_the_runtime_image_and_the_volume(
    project: dict[str, Path],
) -> None:
    engine = FakeEngine("nothing")
    backend = DockerBackend(
        engine, address="unix:///x", session_id="s", owner=OWNER, host_files="copy"
    )
    kwargs = backend.create_kwargs(spec_of(project))
    assert kwargs["image"].startswith("sandbox-replay-runtime:")
    mounts = kwargs["host_config"]["Mounts"]
    assert [(m["Type"], m["Target"], m["ReadOnly"]) for m in mounts] == [
        ("volume", f"{protocol.TOOLS_DIR}/0", True)
    ]
    assert kwargs["host_config"]["ReadonlyRootfs"] is True
    assert kwargs["host_config"]["NetworkMode"] == "none"
    assert kwargs["host_config"]["CapDrop"] == ["ALL"]


def test_archives_are_deterministic_and_refuse_links(
    tmp_path: Path, project: dict[str, Path]
) -> None:
    one = archive(list(entries_of(project["tools"])))
    (project["tools"] / "my_tools.py").touch()  # a new mtime: the same archive
    two = archive(list(entries_of(project["tools"])))
    assert (one.digest, one.members) == (two.digest, 3)
    one.close()
    two.close()
    (project["tools"] / "my_tools.py").write_text("def t():\n    return 2\n")
    three = archive(list(entries_of(project["tools"])))
    assert three.digest != one.digest
    three.close()
    (project["tools"] / "link.py").symlink_to(tmp_path)
    with pytest.raises(InfrastructureError, match="link or a special file"):
        list(entries_of(project["tools"]))


def test_the_reaper_prunes_week_old_unused_volumes_and_keeps_the_rest() -> None:
    engine = FakeEngine("nothing")
    old, used, new = (H.VOLUME_PREFIX + c * 40 for c in "abc")
    for name, when in ((old, "2026-11-01"), (used, "2026-11-01"), (new, "2026-12-06")):
        engine.volume_names |= {name, name + H.FILLED_SUFFIX}
        engine.created[name] = engine.created[name + H.FILLED_SUFFIX] = when + "T00:00:00Z"
    engine.in_use.add(used)
    removed = files(engine, "copy").prune(now=datetime(2026, 12, 7, tzinfo=UTC))
    assert removed == [old]
    assert engine.volume_names == {used, used + H.FILLED_SUFFIX, new, new + H.FILLED_SUFFIX}
    # the volume goes first, its marker after: an in-use volume keeps its marker
    removals = [c[1] for c in engine.calls if c[0] == "remove_volume"]
    assert removals.index(old) < removals.index(old + H.FILLED_SUFFIX)
    assert used + H.FILLED_SUFFIX not in removals
