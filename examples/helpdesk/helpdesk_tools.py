"""Tools of the example help-desk agent, one or more of each effect class.

The `read` tools talk to the help desk's "live" system, here a JSON file named by
HELPDESK_DATA (default: data/helpdesk.json beside this file), so that `sandbox-replay record`
can run them for real. In a shadow evaluation they never run: the sandbox serves them from the
task's recorded observations. The `unsafe` tools would change the outside world; no sandboxed
run can resolve them.
"""

import json
import os
from pathlib import Path
from typing import Dict, List, Optional

from runner.sdk import Effect, now, tool

_DATA = Path(__file__).resolve().parent / "data" / "helpdesk.json"


def _db() -> Dict[str, Dict[str, dict]]:
    with open(os.environ.get("HELPDESK_DATA", str(_DATA)), encoding="utf-8") as handle:
        return json.load(handle)


@tool("ticket.get", effect=Effect.READ, description="Fetch a support ticket by id.")
def get_ticket(ticket_id: str) -> dict:
    tickets = _db()["tickets"]
    if ticket_id not in tickets:
        raise KeyError(f"no ticket {ticket_id}")
    return tickets[ticket_id]


@tool("customer.get", effect=Effect.READ, description="Fetch a customer record by id.")
def get_customer(customer_id: str) -> dict:
    return _db()["customers"][customer_id]


@tool("kb.search", effect=Effect.READ, description="Search knowledge-base articles by topic.")
def search_kb(query: str, limit: int = 2) -> List[dict]:
    words = set(query.lower().split())
    articles = _db()["articles"].values()
    scored = sorted(articles, key=lambda a: -len(words & set(a["keywords"])))
    return [a for a in scored if words & set(a["keywords"])][:limit]


@tool("reply.draft", effect=Effect.PURE, description="Compose the reply to a customer.")
def draft_reply(customer_name: str, subject: str, advice: Optional[str] = None) -> str:
    first = customer_name.split()[0] if customer_name else "there"
    body = advice if advice else "We have received your request and will get back to you."
    return f'Hi {first}, about "{subject}": {body}'


@tool("notes.append", effect=Effect.LOCAL, description="Append a note to the run's scratch file.")
def append_note(text: str) -> int:
    path = Path(os.environ.get("TMPDIR", "/tmp")) / "helpdesk-notes.txt"
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(f"{now():.0f} {text}\n")
    return path.stat().st_size


@tool("ticket.close", effect=Effect.UNSAFE, description="Close a ticket in the live help desk.")
def close_ticket(ticket_id: str, resolution: str) -> dict:
    raise RuntimeError("closing tickets needs the live help-desk API")


@tool("email.send", effect=Effect.UNSAFE, description="Email a customer.")
def send_email(to: str, body: str) -> dict:
    raise RuntimeError("sending email needs the live mail API")
