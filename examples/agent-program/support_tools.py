"""The support agent's tools, declared with their effect classes.

``kb.search`` and ``ticket.get`` read the help desk's systems (here: the JSON files in data/,
standing in for live services). In production (``record_production.py``) they run for real
and are recorded; in a sandbox they are served from the task's recorded observations and never
run. ``reply.format`` is pure: it runs everywhere. ``ticket.close`` changes the world: a
workflow that declares it is ineligible for the sandbox (``v3-unsafe.yaml``).
"""

import json
import os

from runner.sdk import Effect, tool

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


def _load(name):
    with open(os.path.join(DATA, name), encoding="utf-8") as handle:
        return json.load(handle)


@tool("kb.search", effect=Effect.READ, description="Search the knowledge base for articles.")
def kb_search(query: str) -> dict:
    words = set(query.lower().replace("?", " ").replace(".", " ").split())
    hits = []
    for article in _load("kb.json"):
        score = len(words & set(article["keywords"]))
        if score:
            hits.append(
                {
                    "id": article["id"],
                    "title": article["title"],
                    "advice": article["advice"],
                    "score": score,
                }
            )
    hits.sort(key=lambda hit: (-hit["score"], hit["id"]))
    return {"hits": hits[:2]}


@tool("ticket.get", effect=Effect.READ, description="Fetch a support ticket by its id.")
def ticket_get(ticket_id: str) -> dict:
    tickets = _load("tickets.json")
    if ticket_id not in tickets:
        raise KeyError(ticket_id)
    return dict(tickets[ticket_id], id=ticket_id)


@tool("reply.format", effect=Effect.PURE, description="Greet the customer and sign the reply.")
def reply_format(customer: str, body: str) -> str:
    return "Hi {},\n\n{}\n\nBest regards,\nSupport".format(customer, body.strip())


@tool("ticket.close", effect=Effect.UNSAFE, description="Close a ticket (writes to the help desk).")
def ticket_close(ticket_id: str) -> dict:
    raise RuntimeError("the live help desk is not part of this example")
