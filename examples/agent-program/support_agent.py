"""Support agent, version 1: answers the customer's question from the knowledge base only.

Program step entry point (``program: support_agent:run``): called with the task input, returns
the reply text.
"""

from agentloop import run_loop
from support_tools import kb_search

SYSTEM = "You are a support agent. Answer from the knowledge base. Be brief."


def run(task_input):
    return run_loop(SYSTEM, task_input["question"], [kb_search])
