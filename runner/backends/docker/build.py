"""One ``docker build`` through the API: no network, no pull, errors with the log's tail.

Used by ``image build`` (`runner.backends.docker.image`) and by copy mode's runtime image
(`runner.backends.docker.runtimeimage`).
"""

from __future__ import annotations

from typing import Any

from runner.backends.docker.client import call, retrying
from runner.errors import InfrastructureError
from runner.hostlog import get_logger

__all__ = ["run_build"]

log = get_logger(__name__)

_LOG_TAIL = 30


def run_build(api: Any, image: str, base: str, **context: Any) -> str:
    """``docker build`` of ``image`` with no network and no pull; its id.

    Args:
        api: low-level docker client.
        image: the tag to build.
        base: the image it is built FROM (named in errors).
        **context: the build context and its options for ``APIClient.build`` (``path``, or
            ``fileobj`` with ``custom_context``; ``buildargs``, ``labels``).

    Raises:
        InfrastructureError: the build failed (log tail attached).
    """
    lines: list[str] = []
    image_id = ""
    stream = call(
        f"build {image}",
        api.build,
        tag=image,
        network_mode="none",
        pull=False,
        rm=True,
        forcerm=True,
        decode=True,
        use_config_proxy=False,
        **context,
    )
    for event in stream:
        if not isinstance(event, dict):
            continue
        if event.get("error"):
            lines.append(str(event["error"]).rstrip())
            tail = "\n".join(lines[-_LOG_TAIL:])
            raise InfrastructureError(f"building {image} from {base} failed:\n{tail}", image=image)
        text = str(event.get("stream") or "").rstrip()
        if text:
            lines.append(text)
            log.debug("image_build_output", line=text)
        aux = event.get("aux")
        if isinstance(aux, dict) and aux.get("ID"):
            image_id = str(aux["ID"])
    if not image_id:
        image_id = str(retrying(f"inspect image {image}", api.inspect_image, image)["Id"])
    return image_id
