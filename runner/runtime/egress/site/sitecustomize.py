"""Load the audit hook and the run's clock in every Python child of the sandbox.

Standard library only, Python 3.9+. The runtime puts this folder first on the children's
``PYTHONPATH`` and names its child log in ``SANDBOX_REPLAY_EGRESS_LOG``
(`runner.runtime.egress.audit.child_environment`); Python imports ``sitecustomize`` at start-up, so
the hook is installed before any of the child's own code runs. Without that variable (a Python
started outside a run) nothing is installed. The run's clock (`runner.sdk.wallclock`) is
installed the same way, frozen at the reading the parent exported in ``SANDBOX_REPLAY_CLOCK``
when it started the child (the reading of the call in progress). A ``python -I``/``-E``/``-S``
child skips this file; the parent's hook reports such a child as partial coverage.

This file shadows any ``sitecustomize`` of the image (Debian ships one): after installing the
hook it runs the shadowed module, so the image's own start-up customisation still happens.
"""

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _runtime_on_path() -> None:
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(_HERE))))
    if root not in sys.path:
        sys.path.append(root)


def _install_hook() -> None:
    if not os.environ.get("SANDBOX_REPLAY_EGRESS_LOG"):
        return
    _runtime_on_path()
    try:
        from runner.runtime.egress import audit

        audit.install_from_env()
    except Exception as exc:  # never break the child's start-up; say why coverage is missing
        sys.stderr.write("sandbox-replay: audit hook not installed: {!r}\n".format(exc))


def _install_clock() -> None:
    # before the hook: patching datetime looks a symbol up with ctypes, which it would report
    if not os.environ.get("SANDBOX_REPLAY_CLOCK"):
        return
    _runtime_on_path()
    try:
        from runner.sdk import wallclock

        wallclock.install_from_env()
    except Exception as exc:  # never break the child's start-up; say why the clock is real
        sys.stderr.write("sandbox-replay: the run's clock not installed: {!r}\n".format(exc))


def _report_clock() -> None:
    module = sys.modules.get("runner.sdk.wallclock")
    problem = module.datetime_problem() if module is not None else None
    audit = sys.modules.get("runner.runtime.egress.audit")
    if problem is not None and audit is not None:
        audit.coverage_note(
            ("clock",), reason="datetime.now() reads the machine's clock: " + problem
        )


def _run_shadowed() -> None:
    import importlib.machinery

    paths = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", paths)
    if spec is None or spec.loader is None:
        return
    # only for an image with a sitecustomize of its own: every Python child runs this file
    import importlib.util

    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.stderr.write("sandbox-replay: the image's sitecustomize failed: {!r}\n".format(exc))


_install_clock()
_install_hook()
_report_clock()
_run_shadowed()
