"""Record the support agent as production would: its own process, the real SDK, live tools.

    python record_production.py [--version 1|2] [--out traces/]

Each task of tasks.jsonl (its input only) is run by the agent inside ``runner.sdk.record``:
the ``@tool`` calls run for real and are recorded, and the model calls the ``openai`` SDK
makes are recorded by the recorder's httpx capture with their raw bodies and model ids (no
change to the agent's code: ``OpenAI()`` is built inside it). Without ``OPENAI_BASE_URL`` the
model is this folder's scripted one, served on a loopback port this script starts, so the
example runs offline; with ``OPENAI_BASE_URL``/``OPENAI_API_KEY`` set it records your real
endpoint. Then: ``sandbox-replay tasks extract traces/ -o recorded-tasks.jsonl``.
"""

import argparse
import contextlib
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import support_model  # noqa: E402

from runner import sdk  # noqa: E402


@contextlib.contextmanager
def scripted_endpoint():
    """Serve support_model as an OpenAI-compatible endpoint on 127.0.0.1 (or use yours)."""
    if os.environ.get("OPENAI_BASE_URL"):
        yield os.environ["OPENAI_BASE_URL"]
        return

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            body = support_model.respond(
                json.loads(raw), api="chat_completions", path=self.path
            ).encode("utf-8")
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield "http://127.0.0.1:{}/v1".format(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


def record_all(version="1", out="traces", tasks_file=None):
    """Run and record every task; return the trace paths written."""
    agent = __import__("support_agent" if version == "1" else "support_agent_v2")
    workflow = os.path.join(HERE, "v{}.yaml".format(version))
    tasks_file = tasks_file or os.path.join(HERE, "tasks.jsonl")
    os.makedirs(out, exist_ok=True)
    written = []
    with open(tasks_file, encoding="utf-8") as handle:
        tasks = [json.loads(line) for line in handle if line.strip()]
    with scripted_endpoint() as url:
        saved = {k: os.environ.get(k) for k in ("OPENAI_BASE_URL", "OPENAI_API_KEY")}
        os.environ["OPENAI_BASE_URL"] = url
        os.environ.setdefault("OPENAI_API_KEY", "sk-local-scripted-model")
        try:
            for task in tasks:
                path = os.path.join(out, "prod-v{}-{}.jsonl".format(version, task["task_id"]))
                with sdk.record(
                    path,
                    task_id=task["task_id"],
                    task_input=task["input"],
                    workflow=workflow,
                    workflow_name="support-agent",
                    workflow_version=version,
                ) as rec:
                    rec.set_output(agent.run(task["input"]))
                written.append(path)
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
    return written


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", choices=("1", "2"), default="1")
    parser.add_argument("--out", default="traces")
    options = parser.parse_args()
    for written in record_all(options.version, options.out):
        print(written)
