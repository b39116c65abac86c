"""The MCP stand-in: what an agent talks to when it starts a workflow's MCP stdio server.

Standard library only, Python 3.9+. Run as ``python -m runner.runtime.mcpproxy -- COMMAND...``
in place of ``COMMAND`` (`runner.runtime.mcpspawn` puts it there). It speaks the MCP stdio
transport with the agent (JSON-RPC 2.0, one message per line; specification 2025-06-18,
"Transports") and asks the runtime, over the gateway's loopback port
(`runner.runtime.mcphub.MCP_PATH`), what to do with every request:

- ``{"answer": response}``: written to the agent (served from the trace, denied, or a miss);
- ``{"forward": true}``: the request goes to the real server (started then, on the first such
  answer: never in ``reproduce``, where every answer comes from the trace), the server's
  response goes back to the runtime to be recorded, and the runtime's answer to the agent.

Notifications and responses the agent sends (``notifications/initialized``, an answer to a
server's own request) go to the server when it runs, else nowhere. What the server sends
besides the awaited response (log and progress notifications, its own requests) is passed to
the agent as it came, not recorded. Requests are handled one at a time in the order they came
(a client that pipelines them waits; their order in the trace is the order they were sent).

Everything read is hostile: a line of either side is at most `MAX_LINE_BYTES` (a longer one
ends the stand-in with an error on stderr: the client sees the server end), decoded by the
project's strict JSON decoder; a line that is not a JSON object is skipped (at most
`MAX_SKIPPED`, a stray ``print`` of a server's), answers of the runtime too. The server gets
each message re-encoded as it was decoded here (`StandIn.to_server`), never the agent's line.
"""

import contextlib
import http.client
import json
import os
import queue
import signal
import subprocess
import sys
import threading
from typing import IO, Any, Dict, List, Optional, Tuple

from runner.runtime.mcphub import ENV_STANDIN, MCP_PATH
from runner.sdk.mcpcalls import MAX_LINE_BYTES, server_ended
from runner.trace.strictjson import loads as strict_loads

MAX_SKIPPED = 1000
MAX_ANSWER_BYTES = 16 << 20
GATEWAY_TIMEOUT_S = 3600.0  # a served call answers at once; a forwarded one is recorded at once

Item = Tuple[str, Optional[bytes]]  # ("client" | "server", a line or None at its end)


def _decided(message: Dict[str, Any]) -> bool:
    """True for a client message the hub decides: one with a method, but for a notification.

    Only ``notifications/...`` without an id (and responses, which have no method) pass on
    undecided: a ``tools/call`` without an id, or with ``id: null``, reached the server
    undecided (found in review).
    """
    if "method" not in message:
        return False
    method = message["method"]
    notification = isinstance(method, str) and method.startswith("notifications/")
    return "id" in message or not notification


class StandInError(Exception):
    """The stand-in cannot go on (a line too long, the runtime unreachable)."""


def _read_lines(stream: "IO[bytes]", side: str, items: "queue.Queue[Item]") -> None:
    try:
        while True:
            line = stream.readline(MAX_LINE_BYTES + 1)
            if not line:
                break
            items.put((side, line))
            if len(line) > MAX_LINE_BYTES:
                break
    except (OSError, ValueError):
        pass
    items.put((side, None))


def decode(line: bytes) -> Optional[Dict[str, Any]]:
    """A JSON-RPC message of a line (a JSON object), or None for anything else.

    Raises:
        StandInError: a line over `MAX_LINE_BYTES`.
    """
    if len(line) > MAX_LINE_BYTES:
        raise StandInError("a message over {} bytes".format(MAX_LINE_BYTES))
    try:
        value = strict_loads(line)
    except (ValueError, UnicodeDecodeError):
        return None
    return value if isinstance(value, dict) else None


class StandIn:
    """One stand-in: the agent on stdin/stdout, the runtime at ``gateway``, maybe a server.

    Args:
        command: the real server's command.
        gateway: ``host:port`` of the runtime's gateway.
        server: the server's label (``tools[i]``).
        client_in, client_out: the agent's side (binary).
    """

    def __init__(
        self,
        command: List[str],
        gateway: str,
        server: str,
        client_in: "IO[bytes]",
        client_out: "IO[bytes]",
    ) -> None:
        self.command = command
        host, _, port = gateway.rpartition(":")
        if not host or not port.isdigit():
            raise StandInError("no gateway address ({!r})".format(gateway[:80]))
        self.host, self.port = host, int(port)
        self.server = server
        self.client_out = client_out
        self.items: "queue.Queue[Item]" = queue.Queue()
        self.process: Optional["subprocess.Popen[bytes]"] = None
        self.skipped = 0
        self.client_closed = False
        threading.Thread(
            target=_read_lines, args=(client_in, "client", self.items), daemon=True
        ).start()

    # --- the runtime ------------------------------------------------------------------------

    def ask(self, exchange: Dict[str, Any]) -> Dict[str, Any]:
        """Post ``exchange`` to the runtime and return its answer (a JSON object).

        Raises:
            StandInError: unreachable, an HTTP error, or an answer that is not an object.
        """
        body = json.dumps(dict(exchange, server=self.server), separators=(",", ":"))
        connection = http.client.HTTPConnection(self.host, self.port, timeout=GATEWAY_TIMEOUT_S)
        try:
            connection.request(
                "POST", MCP_PATH, body.encode("utf-8"), {"Content-Type": "application/json"}
            )
            response = connection.getresponse()
            data = response.read(MAX_ANSWER_BYTES + 1)
        except OSError as exc:
            raise StandInError("the runtime did not answer: {}".format(exc)) from None
        finally:
            connection.close()
        if response.status != 200 or len(data) > MAX_ANSWER_BYTES:
            raise StandInError("the runtime answered HTTP {}".format(response.status))
        try:
            answer = strict_loads(data)
        except (ValueError, UnicodeDecodeError) as exc:
            raise StandInError("the runtime's answer is not JSON: {}".format(exc)) from None
        if not isinstance(answer, dict):
            raise StandInError("the runtime's answer is not an object")
        return answer

    # --- the two sides ----------------------------------------------------------------------

    def to_client(self, message: Any) -> None:
        """Write one message to the agent."""
        data = json.dumps(message, separators=(",", ":"), ensure_ascii=False) + "\n"
        self.client_out.write(data.encode("utf-8"))
        self.client_out.flush()

    def to_server(self, message: Dict[str, Any]) -> None:
        r"""Write one message to the server (started before), as the hub saw it.

        Never the agent's line as it came: a reader with universal newlines (the ``mcp``
        package's stdio server, any ``TextIOWrapper``) splits a line at a bare ``\r``, which is
        JSON whitespace, so a line decoded here as one harmless message could reach the server
        as several, one a ``tools/call`` the hub never saw. Compact ASCII JSON has no byte
        any line reader splits at but the final newline.
        """
        assert self.process is not None and self.process.stdin is not None
        data = json.dumps(message, separators=(",", ":"), ensure_ascii=True) + "\n"
        try:
            self.process.stdin.write(data.encode("ascii"))
            self.process.stdin.flush()
        except OSError:
            pass  # it ended: its reader says so

    def start_server(self) -> None:
        """Start the real server (once), with this process's environment minus the stand-in's."""
        if self.process is not None:
            return
        environment = dict(os.environ)
        environment.pop(ENV_STANDIN, None)
        try:
            self.process = subprocess.Popen(
                self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=environment
            )
        except (OSError, ValueError) as exc:
            raise StandInError("the MCP server did not start: {}".format(exc)) from None
        assert self.process.stdout is not None
        threading.Thread(
            target=_read_lines, args=(self.process.stdout, "server", self.items), daemon=True
        ).start()

    # --- the loop ---------------------------------------------------------------------------

    def run(self) -> int:
        """Serve until the agent closes its side; return the exit code."""
        deferred: List[bytes] = []
        while True:
            line: Optional[bytes]
            if deferred:
                side, line = "client", deferred.pop(0)
            elif self.client_closed:
                return 0
            else:
                side, line = self.items.get()
            if line is None:
                if side == "client":
                    return 0
                continue  # the server ended: a request forwarded later says so
            message = self._message(line)
            if message is None:
                continue
            if side == "server":
                self.to_client(message)  # a notification or a request of the server's
            elif _decided(message):
                self._request(message, deferred)  # the hub refuses a null id: not a request
            elif self.process is not None:
                self.to_server(message)  # a notification or a response of the agent's

    def _message(self, line: bytes) -> Optional[Dict[str, Any]]:
        message = decode(line)
        if message is None:
            self.skipped += 1
            if self.skipped > MAX_SKIPPED:
                raise StandInError("more than {} lines that are not messages".format(MAX_SKIPPED))
        return message

    def _request(self, message: Dict[str, Any], deferred: List[bytes]) -> None:
        answer = self.ask({"message": message})
        if answer.get("forward") is True:
            self.start_server()
            self.to_server(message)
            response = self._await(message.get("id"), deferred)
            answer = self.ask({"message": message, "response": response})
        if "answer" not in answer:
            raise StandInError("the runtime's answer has neither 'answer' nor 'forward'")
        self.to_client(answer["answer"])

    def _await(self, ident: Any, deferred: List[bytes]) -> Any:
        """The server's response to request ``ident``; other traffic passed on meanwhile."""
        while True:
            side, line = self.items.get()
            if line is None:
                if side == "client":
                    self.client_closed = True  # it sends no more: it may still read answers
                    continue
                code = self.process.poll() if self.process is not None else None
                return server_ended(code)
            message = self._message(line)
            if message is None:
                continue
            if side == "client":
                if _decided(message):
                    deferred.append(line)  # answered after this one
                else:
                    self.to_server(message)  # e.g. the answer to a server's sampling request
            elif message.get("id") == ident and "method" not in message:
                return message
            else:
                self.to_client(message)

    def close(self) -> None:
        """End the server, if one was started."""
        if self.process is None:
            return
        try:
            if self.process.stdin is not None:
                self.process.stdin.close()
            self.process.wait(timeout=2.0)
        except (OSError, subprocess.TimeoutExpired):
            with contextlib.suppress(OSError):
                os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait()


def main(argv: List[str]) -> int:
    """``-- COMMAND...``: serve as the stand-in of ``COMMAND`` (settings from `ENV_STANDIN`)."""
    if not argv or argv[0] != "--" or len(argv) < 2:
        sys.stderr.write("usage: python -m runner.runtime.mcpproxy -- COMMAND...\n")
        return 2
    try:
        settings = json.loads(os.environ.get(ENV_STANDIN) or "{}")
    except ValueError:
        settings = {}
    if not isinstance(settings, dict):
        settings = {}
    standin: Optional[StandIn] = None
    try:
        standin = StandIn(
            argv[1:],
            str(settings.get("gateway") or ""),
            str(settings.get("server") or ""),
            sys.stdin.buffer,
            sys.stdout.buffer,
        )
        return standin.run()
    except StandInError as exc:
        sys.stderr.write("sandbox-replay MCP stand-in: {}\n".format(exc))
        return 1
    except (BrokenPipeError, KeyboardInterrupt):
        return 0
    finally:
        if standin is not None:
            standin.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
