"""What leaves the sandbox's tools: the outbound-destination log and its coverage.

Standard library only, Python 3.9+; mounted into sandboxes. Imported by every Python child at
start-up (``site/sitecustomize.py``), so this file imports nothing.

Modules: ``audit`` (the audit hook: state, sinks, destinations, coverage; the host reads its
cap and destination key), ``events`` (what each audited event names: a destination, a child
program, a foreign library; pure functions), ``programs`` (which child processes escape the
hook), ``childlog`` (the file Python children report to, forwarded by the runtime), and
``site/`` (the ``sitecustomize.py`` that loads the hook and the run's clock in every Python
child).

May import: the standard library and `runner.sdk.wallclock` (the child's clock, from
``site/``).
"""

__all__ = ["audit"]
