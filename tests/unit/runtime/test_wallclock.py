"""The run's wall clock: every wall-clock read is the run's reading, frozen per call.

`runner.sdk.wallclock.install` patches a whole interpreter, so each check runs in a fresh
one (this interpreter and, when present, Python 3.9, the oldest the sandbox side supports).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from runner.runtime.egress import audit, programs
from runner.runtime.replay.clock import Clock
from runner.sdk import wallclock
from tests.support.paths import REPO

ROOT = REPO
PY39 = "/root/.pyenv/versions/3.9.18/bin/python"
READING = 1551675967.0  # 2019-03-04T05:06:07Z: the clock_start
PYTHONS = [sys.executable] + ([PY39] if Path(PY39).is_file() else [])


def _run(python: str, script: str, **env: str) -> dict[str, Any]:
    environment = {"PATH": os.environ.get("PATH", ""), "TZ": "UTC", "PYTHONPATH": str(ROOT)}
    environment.update(env)
    done = subprocess.run(
        [python, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        env=environment,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


EVERY_READ = f"""
import io, json, logging, pickle, time
from datetime import datetime as taken_before
from runner.sdk import wallclock
out = {{"problem": wallclock.install()}}
wallclock.set_reading({READING}, export=False)
import datetime as dt
from datetime import date, datetime
out.update({{
    "time": time.time(), "time_ns": time.time_ns(),
    "clock_gettime": time.clock_gettime(time.CLOCK_REALTIME),
    "clock_gettime_ns": time.clock_gettime_ns(time.CLOCK_REALTIME),
    "gmtime": list(time.gmtime()[:6]), "localtime": list(time.localtime()[:6]),
    "strftime": time.strftime("%Y-%m-%dT%H:%M:%S"), "ctime": time.ctime(),
    "asctime": time.asctime(),
    "now": datetime.now().isoformat(), "now_utc": datetime.now(dt.timezone.utc).isoformat(),
    "utcnow": datetime.utcnow().isoformat(), "dt_today": datetime.today().isoformat(),
    "today": date.today().isoformat(), "module_today": dt.date.today().isoformat(),
    "taken_before": taken_before.now().isoformat(),
    "value_now": datetime(2020, 1, 1).now().isoformat(),
}})
stream = io.StringIO()
logging.basicConfig(stream=stream, format="%(asctime)s|%(created)s", force=True)
logging.warning("one")
logging.warning("two")
out["log"] = stream.getvalue().splitlines()
out["after_logging"] = time.time()
start = time.monotonic()
time.sleep(0.05)
out["monotonic_moved"] = time.monotonic() - start >= 0.04
out["after_sleep"] = time.time()
out["explicit"] = [list(time.gmtime(0)[:3]), time.strftime("%Y", time.gmtime(0)),
                   datetime.fromtimestamp(0, dt.timezone.utc).year]
value = datetime.now()
out["value_is_original"] = type(value) is wallclock._RealDatetime
original = wallclock._RealDatetime
out["isinstance"] = [isinstance(value, datetime), isinstance(original(2020, 1, 1), datetime),
                     isinstance(value, date), issubclass(original, datetime)]
out["pickle"] = pickle.loads(pickle.dumps(value)) == value
out["pickle_bytes_unchanged"] = pickle.dumps(value) == pickle.dumps(
    wallclock._RealDatetime(2019, 3, 4, 5, 6, 7))
class Later(datetime):
    pass
out["subclass"] = [type(Later(2020, 1, 1)).__name__, type(Later.now()).__name__]
out["repr"] = [repr(value), repr(date.today())]
out["name"] = [dt.datetime.__module__ + "." + dt.datetime.__qualname__, time.time.__name__]
try:
    import yaml
    out["yaml"] = yaml.safe_dump({{"a": datetime.now()}}).strip()
except ImportError:
    out["yaml"] = None
print(json.dumps(out))
"""


@pytest.mark.parametrize("python", PYTHONS)
def test_every_wall_clock_read_returns_the_frozen_reading(python: str) -> None:
    out = _run(python, EVERY_READ)
    assert out["time"] == out["clock_gettime"] == READING
    assert out["time_ns"] == out["clock_gettime_ns"] == int(READING) * 10**9
    assert out["gmtime"] == out["localtime"] == [2019, 3, 4, 5, 6, 7]
    assert out["strftime"] == "2019-03-04T05:06:07"
    assert out["ctime"] == out["asctime"] == "Mon Mar  4 05:06:07 2019"
    assert out["problem"] is None
    assert out["now"] == out["utcnow"] == out["dt_today"] == "2019-03-04T05:06:07"
    # the class itself is patched: a name taken before install, and x.now() on a value
    assert out["taken_before"] == out["value_now"] == "2019-03-04T05:06:07"
    assert out["now_utc"] == "2019-03-04T05:06:07+00:00"
    assert out["today"] == out["module_today"] == "2019-03-04"
    # frozen per call: logging reads the clock, and later reads do not move
    assert [line.split("|")[0] for line in out["log"]] == ["2019-03-04 05:06:07,000"] * 2
    assert out["after_logging"] == out["after_sleep"] == READING
    assert out["monotonic_moved"] is True  # monotonic and sleep stay real
    assert out["explicit"] == [[1970, 1, 1], "1970", 1970]  # an explicit time is converted as is
    assert out["value_is_original"] is True and out["isinstance"] == [True] * 4
    assert out["pickle"] is True and out["pickle_bytes_unchanged"] is True
    assert out["subclass"] == ["Later", "Later"]
    assert out["yaml"] in ("a: 2019-03-04 05:06:07", None)  # type-keyed tables still work
    assert out["repr"] == ["datetime.datetime(2019, 3, 4, 5, 6, 7)", "datetime.date(2019, 3, 4)"]
    assert out["name"] == ["datetime.datetime", "time"]


def test_without_a_reading_the_replaced_functions_read_the_machines_clock() -> None:
    out = _run(
        sys.executable,
        """
        import json, time
        from runner.sdk import wallclock
        before = time.time()
        wallclock.install()
        from datetime import datetime
        print(json.dumps({"before": before, "time": time.time(),
                          "now": datetime.now().timestamp(), "real": wallclock.real_time()}))
        """,
    )
    assert out["before"] <= out["time"] <= out["now"] <= out["real"] + 1


def test_python_children_start_at_the_reading_of_the_call_that_started_them() -> None:
    env = audit.child_environment("/dev/null")
    out = _run(
        sys.executable,
        f"""
        import json, subprocess, sys
        from runner.sdk import wallclock
        wallclock.install()
        child = ("import datetime, json, time; print(json.dumps([time.time(), "
                 "datetime.datetime.now().isoformat()]))")
        seen = []
        for reading in ({READING}, {READING} + 60):
            wallclock.set_reading(reading)  # the runtime does this at every call
            done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True)
            seen.append(json.loads(done.stdout))
        isolated = subprocess.run([sys.executable, "-I", "-c", "import time; print(time.time())"],
                                  capture_output=True, text=True)
        seen.append(float(isolated.stdout))
        print(json.dumps(seen))
        """,
        PYTHONPATH=env["PYTHONPATH"],
    )
    assert out[0] == [READING, "2019-03-04T05:06:07"]
    assert out[1] == [READING + 60, "2019-03-04T05:07:07"]
    assert out[2] > READING + 10**8  # python -I skips sitecustomize: the machine's clock


def test_sdk_record_freezes_each_tool_call_at_its_recorded_reading(tmp_path: Path) -> None:
    trace = tmp_path / "run.jsonl"
    out = _run(
        sys.executable,
        f"""
        import json, time
        from datetime import datetime  # taken before the recorder installs the clock
        from runner import sdk

        @sdk.tool("clock.read", effect=sdk.Effect.PURE)
        def read() -> dict:
            first = time.time()
            time.sleep(0.01)
            return {{"time": first, "again": time.time(), "now": datetime.now().isoformat()}}

        readings = iter([{READING}, {READING} + 1, {READING} + 2])
        with sdk.record({str(trace)!r}, clock=lambda: next(readings)):
            read()
            read()
            outside = time.time()
        print(json.dumps({{"outside": outside}}))
        """,
    )
    assert out["outside"] > READING + 10**8  # outside recorded calls: the machine's clock
    lines = [json.loads(line) for line in trace.read_text().splitlines()]
    calls = [line for line in lines if line["type"] == "call"]
    for call, expected in zip(calls, ("2019-03-04T05:06:08", "2019-03-04T05:06:09"), strict=True):
        body = json.loads(call["body"])
        assert body["time"] == body["again"] == call["clock"]
        assert body["now"] == expected


def test_the_runtime_clock_publishes_every_reading_and_record_reads_the_machine() -> None:
    published: list[float] = []
    shadow = Clock(READING, 1.0, publish=published.append)
    assert [shadow.advance(0), shadow.advance(1)] == [READING + 1, READING + 2]
    assert published == [READING, READING + 1, READING + 2]
    live = Clock(1000.0, 0.0, live=True)
    first = live.advance(0)
    assert 1000.0 < first <= live.advance(1) <= wallclock.real_time()


def test_children_that_read_the_machines_clock_are_coverage_notes_with_clock_machine() -> None:
    site, log, clock = audit.SITE_DIR, audit.ENV_LOG, wallclock.ENV_CLOCK
    assert audit.ENV_CLOCK == wallclock.ENV_CLOCK
    date = programs.classify("/bin/date", ["/bin/date", "+%s"], None, log, site, clock)
    assert date is not None and date[1]["clock"] == "machine"
    isolated = programs.classify("python3", ["python3", "-I", "x.py"], None, log, site, clock)
    assert isolated is not None and isolated[1]["clock"] == "machine"
    env = {log: "/tmp/log", "PYTHONPATH": site}  # hook kept, the clock variable dropped
    dropped = programs.classify("python3", ["python3", "x.py"], env, log, site, clock)
    assert dropped is not None and dropped[1]["clock"] == "machine"
    assert clock in dropped[1]["reason"]
    kept = programs.classify("python3", ["python3", "x.py"], {**env, clock: "1"}, log, site, clock)
    assert kept is None
    shell = programs.classify_command("date +%s", None, log, site, clock)
    assert shell is not None and shell[1]["clock"] == "machine"
