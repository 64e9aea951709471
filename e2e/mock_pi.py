#!/usr/bin/env python3
"""Scripted mock of the OpenAI Chat Completions API for Pi 0.73.1 (a custom provider with
`"api": "openai-completions"` in $PI_CODING_AGENT_DIR/models.json), for the preloop-hooks
e2e suite (Python 3.11 stdlib only; ported from the project's shared rig).

Pi speaks the same wire as Copilot CLI's BYOK mode (docs/contracts/pi.md §1: one streaming
POST .../chat/completions per model turn, tools read/bash/edit/write, bash arguments
{"command": ...}), so this is mock_copilot.py's handler under its own name: the same script
format (turns of "calls"/"text", "before_reply_cmd" to send a note mid-run), the same JSONL
log. The turn index is the number of assistant messages in the request, so a continuation
(Pi's triggerTurn after agent_end) moves on to the next scripted turn.
"""

import mock_common as mc
from mock_copilot import DEFAULT_SCRIPT, Handler as ChatHandler


class Handler(ChatHandler):
    server_version = "mock-pi/1.0"


if __name__ == "__main__":
    mc.main("mock_pi", Handler, __doc__, DEFAULT_SCRIPT)
