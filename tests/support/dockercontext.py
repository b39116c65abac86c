"""Docker contexts written as the docker CLI writes them, for the engine-discovery tests.

``docker context create NAME --docker host=HOST`` writes
``contexts/meta/<sha256 of NAME>/meta.json``; ``docker context use NAME`` sets ``currentContext``
in ``config.json`` (checked against docker 20.10's CLI).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path


def write_context(config_dir: Path, name: str, host: str, *, current: bool = False) -> None:
    """Add context ``name`` (endpoint ``host``) to the docker config folder ``config_dir``."""
    meta = config_dir / "contexts" / "meta" / hashlib.sha256(name.encode()).hexdigest()
    meta.mkdir(parents=True)
    (meta / "meta.json").write_text(
        json.dumps(
            {
                "Name": name,
                "Metadata": {},
                "Endpoints": {"docker": {"Host": host, "SkipTLSVerify": False}},
            }
        )
    )
    config = config_dir / "config.json"
    data = json.loads(config.read_text()) if config.exists() else {"auths": {}}
    if current:
        data["currentContext"] = name
    config.write_text(json.dumps(data))
