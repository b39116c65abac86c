"""Take the screenshots in docs/ from the demo's job, in Debian's headless chromium.

Usage (after ``make demo``, which prints its state folder)::

    SANDBOX_REPLAY_STATE_DIR=/tmp/sandbox-replay-demo.XXXXXX .venv/bin/python docs/screenshots.py

Needs the ``dev`` extra (``pip install -e '.[dev]'``, which ``make setup`` installs: the browser
driver is the tests' own, tests/support/browser.py, and it uses pytest) and Debian's
``chromium``; without either it says so and exits 2.

Writes, at 1400 × 900 CSS pixels:

- ``docs/report.png``: the first screen of the job's ``report.html`` (the verdict first);
- ``docs/report-conversation.png``: the first episode with a model turn and a tool call, its
  conversation open.

The browser runs in a network namespace with no route (tests/support/browser.py): the page
opens from disk and loads nothing.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

try:
    from tests.support.browser import browser
except ModuleNotFoundError as missing:  # pytest: the dev extra is not installed
    print(
        f"docs/screenshots.py needs the dev extra (pip install -e '.[dev]'): {missing}"
        " (tests/support/browser.py drives the browser)",
        file=sys.stderr,
    )
    sys.exit(2)

# the first episode whose calls hold a model turn and a tool call
FIND_EPISODE = """(() => {
  const data = JSON.parse(document.getElementById('report-data').textContent);
  for (const [n, ep] of Object.entries(data.episodes || {})) {
    const kinds = (ep.calls || []).map(c => c.kind);
    if (kinds.includes('turn') && kinds.includes('tool')) { return Number(n); }
  }
  return null;
})()"""


def main() -> None:
    """Find the demo's job, open its page, save the two screenshots."""
    state = Path(os.environ.get("SANDBOX_REPLAY_STATE_DIR", ""))
    pages = sorted((state / "jobs").glob("*/report.html"))
    if not state.name or not pages:
        sys.exit("set SANDBOX_REPLAY_STATE_DIR to the state folder `make demo` printed")
    page = pages[-1]
    try:
        _take(page)
    except BaseException as exc:  # the tests' driver says "no browser" as pytest's skip/fail
        if type(exc).__module__.startswith("_pytest"):
            print(f"docs/screenshots.py: {exc}", file=sys.stderr)
            sys.exit(2)
        raise


def _take(page: Path) -> None:
    """Open ``page`` in the headless browser and save the two screenshots."""
    with (
        tempfile.TemporaryDirectory(prefix="screenshots-") as tmp,
        browser(Path(tmp), width=1400, height=900) as b,
    ):
        b.open(page.as_uri())
        b.screenshot(ROOT / "docs" / "report.png")
        n = b.js(FIND_EPISODE)
        if n is None:
            sys.exit(f"{page}: no episode with a model turn and a tool call")
        b.click(f"#episode-{n} details.conversation summary")
        while not b.js(f"document.querySelectorAll('#episode-{n} .call').length"):
            time.sleep(0.05)
        b.js(f"document.querySelector('#episode-{n} details.conversation').scrollIntoView()")
        b.js("window.scrollBy(0, -90)")  # the episode's line in view, below the filter bar
        time.sleep(0.2)
        b.screenshot(ROOT / "docs" / "report-conversation.png")
    print(f"docs/report.png, docs/report-conversation.png from {page}")


if __name__ == "__main__":
    main()
