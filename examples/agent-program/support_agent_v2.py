"""Support agent, version 2: reads the ticket first, answers by name, formats the reply.

Differs from version 1 in behaviour: it also has ``ticket.get`` (and tells the model the ticket
id), so the model looks the customer up before searching the knowledge base, and the answer is
put into the house format with the pure ``reply.format`` tool.
"""

from agentloop import run_loop
from support_tools import kb_search, reply_format, ticket_get

SYSTEM = (
    "You are a support agent. Look the ticket up first, then search the knowledge base, "
    "then format the reply for the customer."
)


def run(task_input):
    user = "Ticket {}: {}".format(task_input["ticket_id"], task_input["question"])
    return run_loop(SYSTEM, user, [ticket_get, kb_search, reply_format])
