"""The nondeterminism report's observers: the user's reads are counted, the runtime's are not.

Each case runs in a fresh interpreter (the observers patch ``random``, ``os`` and the clock of
the whole process, for good): a user module outside the standard library and ``runner`` does
the reads; the report is what `runner.runtime.nondeterminism.drain` hands the worker's answer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[3]

DRIVER = """
import json, sys
sys.path.insert(0, {tools!r})
sys.path.insert(0, {package!r})
from runner.sdk import wallclock
wallclock.install()
wallclock.set_reading(1796001701.0)
from runner.runtime import nondeterminism
nondeterminism.install([{tools!r}], own_env=["GATEWAY_URL"])
import user_code
user_code.run()
print(json.dumps(nondeterminism.drain()))
"""


def _report(tmp_path: Path, body: str, **env: str) -> dict[tuple[str, str], dict[str, Any]]:
    tools = tmp_path / "tools"
    tools.mkdir()
    package = tmp_path / "lib" / "site-packages"  # an installed package's reads: by package
    package.mkdir(parents=True)
    (package / "sdkpkg.py").write_text(
        "import os\ndef configure():\n    return os.environ.get('SDK_LOG')\n", encoding="utf-8"
    )
    (tools / "user_code.py").write_text(
        "def run():\n" + textwrap.indent(textwrap.dedent(body), "    "), encoding="utf-8"
    )
    done = subprocess.run(
        [sys.executable, "-c", DRIVER.format(tools=str(tools), package=str(package))],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO), **env},
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1]) or {"entries": []}
    return {(e["kind"], e["what"]): e for e in found["entries"]}


def test_each_kind_of_read_is_listed_with_its_site(tmp_path: Path) -> None:
    outside = Path("/etc/passwd")  # outside the snapshot, the interpreter and the temp folder
    found = _report(
        tmp_path,
        f"""
        import datetime, os, random, secrets, time, uuid
        time.time(); time.time()
        datetime.datetime.now()
        random.random()
        uuid.uuid4()
        secrets.token_hex(4)
        os.environ["USER_SETTING"]
        os.environ.get("NOT_SET_ANYWHERE")
        open({str(outside)!r}).read()
        """,
        USER_SETTING="1",
    )
    assert found[("wall_clock", "time.time")]["count"] == 2
    assert found[("wall_clock", "time.time")]["site"].endswith("user_code.py:4")
    assert ("wall_clock", "datetime.now") in found
    assert ("randomness", "random.random") in found
    urandom = found[("randomness", "os.urandom")]
    assert urandom["count"] == 2 and urandom["via"] in ("uuid.uuid4", "secrets.token_hex")
    assert found[("environment_variable", "USER_SETTING")]["present"] is True
    unset = found[("environment_variable", "NOT_SET_ANYWHERE")]
    # said as the code wrote it (was: "via collections.abc.get", the Mapping method behind it)
    assert unset["present"] is False and unset["via"] == "os.environ.get"
    assert ("file_read", str(outside)) in found
    assert {e["by"] for e in found.values()} == {"code"}


def test_a_read_by_an_installed_package_is_the_packages(tmp_path: Path) -> None:
    found = _report(tmp_path, "import sdkpkg\nsdkpkg.configure()\n")
    entry = found[("environment_variable", "SDK_LOG")]
    assert entry["by"] == "package" and "site-packages/sdkpkg.py:3" in entry["site"]


def test_pinned_reads_and_the_runtimes_own_are_not_listed(tmp_path: Path) -> None:
    found = _report(
        tmp_path,
        """
        import json, logging, os, random, tempfile
        from runner.sdk import now
        now()                                   # the run's clock
        logging.getLogger("x").warning("hi")    # a log record's timestamp
        random.seed(7); random.random()         # seeded
        os.environ.get("GATEWAY_URL")           # the runtime's own
        os.environ.get("SANDBOX_REPLAY_CLOCK")
        path = os.path.join(tempfile.gettempdir(), "mine.txt")
        with open(path, "w") as handle:
            handle.write("x")
        open(path).read()                       # the run wrote it
        json.dumps({})                          # the standard library's own files
        """,
    )
    assert found == {}


def test_a_generator_without_a_seed_and_the_random_device_are_randomness(tmp_path: Path) -> None:
    found = _report(
        tmp_path,
        """
        import random
        random.Random().random()
        random.seed()
        with open("/dev/urandom", "rb") as handle:
            handle.read(4)
        """,
    )
    assert set(found) == {
        ("randomness", "random.Random() without a seed"),
        ("randomness", "random.seed() without a value"),
        ("randomness", "/dev/urandom"),
    }


def test_the_standard_librarys_own_lookup_of_a_variable_is_the_stdlibs(tmp_path: Path) -> None:
    found = _report(
        tmp_path, "import urllib.request\nurllib.request.getproxies()\n", HTTPS_PROXY="x"
    )
    assert found, found  # urllib iterates the whole environment for *_proxy variables
    assert {e["by"] for e in found.values()} == {"stdlib"}, found
