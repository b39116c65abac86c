"""The sandbox images a command's runs need exist on the engine, asked before anything starts.

A workflow's ``image:`` (or ``--image``, ``SANDBOX_REPLAY_IMAGE``) names an image the user
builds (``sandbox-replay image build --tag NAME``). One the engine lacks used to surface as the
first sandbox's "create container: image not found", exit 6, after ``submit`` had printed a plan
whose job id then named nothing. `require_images` asks the engine once per image
(`Backend.image_id`: an inspect, milliseconds) and refuses the invocation as invalid input,
exit 2, naming each run that needs a missing image and where the image was named: the image
is a value the user gave, the way ``--runtime`` naming a runtime the engine lacks is exit 2
(README, ``SANDBOX_REPLAY_RUNTIME``). An engine that cannot be asked stays exit 6.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from runner.errors import InfrastructureError, InputError

if TYPE_CHECKING:
    from runner.backends.base import Backend
    from runner.settings import Settings

__all__ = ["ImageUse", "image_source", "require_images", "workflow_image_source"]

IMAGE_NOT_FOUND = 404
"""The status `runner.backends.docker.client.translate` gives a missing image's error."""


@dataclass(frozen=True)
class ImageUse:
    """One run (or set of runs) that needs an image, and who named the image.

    Attributes:
        image: the image reference (``my-agent:sdk-2``).
        who: what runs in it, as the error names it (``variant helpdesk-triage@2``).
        named_by: where the image was named (``v2.yaml:5 image``, ``--image``,
            ``SANDBOX_REPLAY_IMAGE``, ``the default image``).
    """

    image: str
    who: str
    named_by: str


def image_source(settings: Settings, flag: str | None = None) -> str:
    """Who named the image a run gets when its workflow names none, for `ImageUse.named_by`.

    Args:
        settings: host settings (``SANDBOX_REPLAY_IMAGE``, else the default image).
        flag: the command's option when it was given (``--image``), which wins.
    """
    if flag is not None:
        return flag
    return "SANDBOX_REPLAY_IMAGE" if "image" in settings.model_fields_set else "the default image"


def workflow_image_source(path: object, workflow: object) -> str:
    """``v2.yaml:5 image:``: where a workflow file names its own image (its line when known)."""
    line_of = getattr(workflow, "line_of", None)
    line = line_of(("image",)) if callable(line_of) else None
    return f"{path}:{line} image:" if line is not None else f"{path} image:"


def require_images(backend: Backend, uses: Sequence[ImageUse]) -> dict[str, str | None]:
    """Ask the engine for every image of ``uses`` once; refuse when any is missing.

    Args:
        backend: the backend whose engine runs the sandboxes.
        uses: the runs and the images they need, in the order the error names them.

    Returns:
        image -> its id (``sha256:...``), None where the backend cannot tell.

    Raises:
        InputError: one or more images are missing (exit 2): every use of a missing image
            named, with the command that builds it; field ``image``.
        InfrastructureError: the engine could not be asked (exit 6).
    """
    found: dict[str, str | None] = {}
    missing: dict[str, str] = {}
    for image in dict.fromkeys(use.image for use in uses):
        try:
            found[image] = backend.image_id(image)
        except InfrastructureError as exc:
            if exc.fields.get("status") != IMAGE_NOT_FOUND:
                raise
            missing[image] = str(exc)
    if not missing:
        return found
    lines = [
        f"{use.who}: image {use.image} ({use.named_by}) does not exist on the engine;"
        f" build it: sandbox-replay image build --tag {use.image}"
        for use in uses
        if use.image in missing
    ]
    raise InputError(
        "; ".join(lines) + " (nothing ran)",
        field="image",
        images=sorted(missing),
        hint="sandbox-replay image build --tag NAME",
    )
