"""Help-desk triage, version 4: the fix for ``traces/failing.jsonl``.

Versions 1-3 fail the whole triage when the help desk has no record of the ticket's customer
(``customer.get`` raises, the run ends ``failed``). This version does the same lookups in the
same order, and when the customer lookup fails it still notes the triage and drafts the reply
with a generic greeting. In a sandbox a recorded error comes back as the runtime's generic
recorded error carrying the original class name, so the fallback catches ``Exception``.

``sandbox-replay reproduce traces/failing.jsonl --fork-at 2 --workflow v4.yaml`` asks whether
this version recovers from the recorded state: the ticket read and the failed customer lookup
served from the trace, the rest run fresh.
"""

from helpdesk_tools import append_note, draft_reply, get_customer, get_ticket


def run(task_input):
    ticket = get_ticket(ticket_id=task_input["ticket_id"])
    try:
        customer = get_customer(customer_id=ticket["customer_id"])
    except Exception:  # a missing customer no longer fails the triage
        customer = {}
    append_note(text="triaged {}".format(task_input["ticket_id"]))
    return draft_reply(customer_name=customer.get("name", ""), subject=ticket["subject"])
