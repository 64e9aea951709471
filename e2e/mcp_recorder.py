#!/usr/bin/env python3
"""A tiny stdio MCP server (stdlib only) named like Preloop's: one tool, `send_note`, whose
every call's arguments are appended as one JSON line to $MCP_RECORD (the e2e tests read
what the harness actually handed the tool). Newline-delimited JSON-RPC 2.0, protocol
version echoed from the client's initialize. Never listens on a socket."""
import json
import os
import sys

TOOL = {
    "name": "send_note",
    "description": "Send an operator note to a run (test double of Preloop's send_note).",
    "inputSchema": {
        "type": "object",
        "properties": {
            "text": {"type": "string"},
            "runtime_session_id": {"type": "string"},
            "preloop_caller_session_id": {"type": "string",
                                          "description": "Harness session id supplied by the Preloop hook"},
        },
        "required": ["text"],
    },
}


def reply(mid, result):
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": mid, "result": result}) + "\n")
    sys.stdout.flush()


def main():
    record = os.environ.get("MCP_RECORD") or "/dev/null"
    for line in sys.stdin:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        method, mid = msg.get("method"), msg.get("id")
        if mid is None:
            continue  # a notification
        if method == "initialize":
            reply(mid, {"protocolVersion": (msg.get("params") or {}).get("protocolVersion", "2025-06-18"),
                        "capabilities": {"tools": {}},
                        "serverInfo": {"name": "preloop-test", "version": "0"}})
        elif method == "tools/list":
            reply(mid, {"tools": [TOOL]})
        elif method == "tools/call":
            params = msg.get("params") or {}
            with open(record, "a") as f:
                f.write(json.dumps({"name": params.get("name"), "arguments": params.get("arguments")}) + "\n")
            reply(mid, {"content": [{"type": "text", "text": "NOTE-QUEUED"}]})
        else:
            sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": mid,
                                         "error": {"code": -32601, "message": "no such method"}}) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
