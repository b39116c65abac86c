"""`image build --requirements/--wheelhouse` without Docker: target tags, pip's command line,
the staged context, and the build over a fake client (no download, no registry)."""

from __future__ import annotations

import hashlib
import tomllib
from pathlib import Path
from typing import Any

import pytest

from runner.backends.docker import image as image_mod
from runner.backends.docker import wheelhouse as wh
from runner.errors import InfrastructureError, InputError
from runner.resources import images_dir
from tests.unit.backends.test_image_base_choice import FakeImagesAPI

ROOT = Path(__file__).resolve().parents[3]
BOOKWORM = wh.Target((3, 11, 2), "cpython", "x86_64", (2, 36))


def test_platforms_follow_the_image_glibc_and_pep_600() -> None:
    tags = BOOKWORM.platforms()
    assert tags[0] == "manylinux_2_36_x86_64" and tags[-1] == "linux_x86_64"
    assert "manylinux_2_17_x86_64" in tags and "manylinux_2_5_x86_64" in tags
    assert {"manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"} <= set(tags)
    assert "manylinux_2_37_x86_64" not in tags
    old = wh.Target((3, 9, 2), "cpython", "aarch64", (2, 15)).platforms()
    assert "manylinux2014_aarch64" not in old and "manylinux2010_aarch64" in old
    musl = wh.Target((3, 12, 1), "cpython", "x86_64", None)
    assert musl.platforms() == ["linux_x86_64"]
    assert BOOKWORM.key == "cp311-manylinux_2_36_x86_64"


def test_parse_probe_reads_the_last_line_and_refuses_anything_else() -> None:
    text = 'noise\n{"version": [3, 11, 2], "implementation": "cpython", "machine": "x86_64", '
    text += '"libc": ["glibc", "2.36"]}\n'
    assert wh.parse_probe(text) == BOOKWORM
    with pytest.raises(InfrastructureError, match="probe output"):
        wh.parse_probe("Traceback (most recent call last)")


def test_download_command_asks_for_wheels_of_the_target_and_pip(tmp_path: Path) -> None:
    command = wh.download_command(tmp_path / "r.txt", tmp_path / "wh", BOOKWORM, ["pip"])
    assert command[:2] == ["pip", "download"]
    assert "--only-binary=:all:" in command
    assert command[command.index("--python-version") + 1] == "3.11"
    assert command[command.index("--implementation") + 1] == "cp"
    platforms = [command[i + 1] for i, part in enumerate(command) if part == "--platform"]
    assert platforms == BOOKWORM.platforms()
    assert command[command.index("-d") + 1] == str(tmp_path / "wh")
    assert command[-3:] == ["-r", str(tmp_path / "r.txt"), "pip"]


def test_download_failure_carries_pip_tail(tmp_path: Path) -> None:
    requirements = tmp_path / "r.txt"
    requirements.write_text("nothing-here==1\n")
    script = tmp_path / "fakepip.py"
    script.write_text(
        "import sys; print('ERROR: No matching distribution', file=sys.stderr); sys.exit(1)\n"
    )
    with pytest.raises(InfrastructureError, match="No matching distribution") as info:
        wh.download(
            requirements, tmp_path / "wh", BOOKWORM, lambda _: None, pip=["python3", str(script)]
        )
    assert info.value.exit_code == 6
    with pytest.raises(InputError, match="requirements file not found"):
        wh.download(tmp_path / "absent.txt", tmp_path / "wh", BOOKWORM, lambda _: None)


def _wheelhouse(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "pip-26.3-py3-none-any.whl").write_bytes(b"pip wheel")
    (folder / "demo-1.0-py3-none-any.whl").write_bytes(b"demo wheel")
    (folder / "notes.txt").write_text("not a wheel")
    return folder


def test_stage_context_copies_images_wheels_and_checksums(tmp_path: Path) -> None:
    folder = _wheelhouse(tmp_path / "wh")
    staged = wh.stage_context(images_dir(), folder, None, tmp_path / "ctx")
    assert (staged.path / "Dockerfile").is_file()
    inside = staged.path / "wheelhouse"
    assert sorted(p.name for p in inside.glob("*.whl")) == list(staged.wheels)
    assert not (inside / "notes.txt").exists()
    assert (inside / "requirements.txt").read_text() == "./demo-1.0-py3-none-any.whl\n"
    sums = (inside / "SHA256SUMS").read_text().splitlines()
    assert f"{hashlib.sha256(b'demo wheel').hexdigest()}  demo-1.0-py3-none-any.whl" in sums
    requirements = tmp_path / "r.txt"
    requirements.write_text("demo==1.0\n")
    again = wh.stage_context(images_dir(), folder, requirements, tmp_path / "ctx2")
    assert (again.path / "wheelhouse" / "requirements.txt").read_text() == "demo==1.0\n"
    assert again.digest != staged.digest


def test_an_empty_or_missing_wheelhouse_is_an_input_error(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="holds no wheel") as info:
        wh.stage_context(images_dir(), tmp_path / "empty", None, tmp_path / "ctx")
    assert info.value.exit_code == 2
    with pytest.raises(InputError, match="wheelhouse folder not found"):
        wh.stage_context(images_dir(), tmp_path / "absent", None, tmp_path / "ctx")


def test_build_with_packages_stages_a_context_and_labels_the_image(tmp_path: Path) -> None:
    folder = _wheelhouse(tmp_path / "cache" / "wheelhouse" / BOOKWORM.key)
    requirements = tmp_path / "r.txt"
    requirements.write_text("demo==1.0\n")
    api = FakeImagesAPI({"sandbox-replay-base:bookworm"})
    seen: dict[str, Any] = {}
    original = api.build

    def build(**kwargs: Any) -> Any:
        context = Path(kwargs["path"])
        seen["files"] = sorted(p.name for p in (context / "wheelhouse").iterdir())
        seen["requirements"] = (context / "wheelhouse" / "requirements.txt").read_text()
        return original(**kwargs)

    api.build = build  # type: ignore[method-assign]
    lines: list[str] = []
    result = image_mod.build_image(
        api,
        image="sandbox-replay:sdks-test",
        base_image="python:3.12-slim",
        offline_base_image="sandbox-replay-base:bookworm",
        offline=True,
        echo=lines.append,
        packages=image_mod.ImagePackages(
            requirements=requirements,
            wheelhouse=None,
            download=False,
            cache_dir=tmp_path / "cache",
        ),
        probe=lambda ref: BOOKWORM,
    )
    assert seen["requirements"] == "demo==1.0\n"
    assert "demo-1.0-py3-none-any.whl" in seen["files"] and "SHA256SUMS" in seen["files"]
    kwargs = next(c[1] for c in api.calls if c[0] == "build")
    assert kwargs["network_mode"] == "none" and kwargs["pull"] is False
    assert len(kwargs["labels"][image_mod.WHEELHOUSE_LABEL]) == 64
    assert result.wheels == ("demo-1.0-py3-none-any.whl", "pip-26.3-py3-none-any.whl")
    assert result.wheelhouse == str(folder)
    assert any("no index, no network" in line for line in lines)
    assert not Path(kwargs["path"]).exists()  # the staged context is removed afterwards


def test_the_dockerfile_installs_with_no_index_from_the_wheelhouse() -> None:
    text = (images_dir() / "Dockerfile").read_text()
    assert "COPY wheelhouse/" in text
    assert "--no-index --find-links" in text and "--only-binary=:all:" in text
    assert (images_dir() / "wheelhouse" / "README.md").is_file()
    assert not list((images_dir() / "wheelhouse").glob("*.whl")), "wheels are never committed"


def test_the_sdk_image_pins_equal_the_dev_extra() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    extra = sorted(config["project"]["optional-dependencies"]["sdks"])
    lines = (ROOT / "tests" / "fixtures" / "sdk-image" / "requirements.txt").read_text()
    pinned = sorted(line for line in lines.splitlines() if line and not line.startswith("#"))
    assert extra == pinned
