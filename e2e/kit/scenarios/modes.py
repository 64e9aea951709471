"""The two modes every scenario runs in: LocalMode (the local inbox: notes and receipts
through `preloop-hooks notes`) and ServerMode (the real Preloop server: a managed agent per
scenario, notes and receipts through its REST API). A mode says how a note is sent, how its
receipt is read, and what binds the note to the run."""

import os
import sys

from ..common import E2E_DIR, KitError, quote_path
from ..server import server_home, server_log_tail
from .base import Scenario, ScenarioFailure

__all__ = ["LocalMode", "ServerMode"]


class LocalMode(Scenario):
    """Local mode: no PRELOOP_URL / PRELOOP_TOKEN, the local inbox under the sandbox's
    PRELOOP_HOME; notes with `preloop-hooks notes send`, receipts with `notes status`."""

    MODE = "local"
    EXPECT_AUTH = "local"

    def note_before_start(self, body, **target):
        if target:
            raise KitError("local notes go to this run's session or the next one, not %r" % target)
        if self.sid:
            # The run has not started: its full id, and --not-started (an id no known
            # session has is refused otherwise).
            return self.sb.cli_json("notes", "send", "--session", self.sid, "--not-started", "--json", body)
        return self.sb.cli_json("notes", "send", "--next", self.HARNESS, "--json", body)

    def note_to_run_argv(self, body):
        """before_reply_cmd sending a note to this run: `notes send --session <id>`; when
        the harness picks its own id, through with_session.py ("@@SESSION@@" = the id the
        SessionStart hook registered)."""
        if self.sid:
            return self.sb.send_note_argv(self.sid, body)
        return [sys.executable, os.path.join(E2E_DIR, "with_session.py")] + self.sb.send_note_argv(
            "@@SESSION@@", body)

    def check_sent_to_run(self, sent):
        session = (sent.get("target") or {}).get("session")
        self.check(session == self.run_result.session_id,
                   "the note was addressed to session %r, want this run's %r: %r"
                   % (session, self.run_result.session_id, sent))

    def receipt_now(self, note_id):
        return self.sb.note_status(note_id)

    def operator_env(self):
        """What the operator CLI needs besides base_env(): nothing (the local inbox)."""
        return {}

    def wait_receipt(self, note_id, states):
        return self.sb.wait_note_state(note_id, states, timeout=8.0)

    def receipt_where(self, note_id):
        return "`notes status %s --json`" % note_id

    def check_binding(self, r, where):
        self.check(r.get("external_session_id") == self.run_result.session_id,
                   "bound to session %r, want this run's %r; %s"
                   % (r.get("external_session_id"), self.run_result.session_id, where))


class ServerMode(Scenario):
    """Server mode against the real Preloop server: a fresh managed agent per scenario
    (its agt_ token as PRELOOP_TOKEN in the harness's, so the hooks', environment), notes
    sent as the human operator (PREREQ["server"], a ServerClient), receipts read from the
    server; PREREQ["creds"] is kit.ensure_server()'s creds.json."""

    MODE = "real server"
    EXPECT_AUTH = "api_key"
    AGENT_KINDS = {"claude": "claude_code", "gemini": "gemini_cli", "copilot": "copilot_cli"}

    def server(self):
        return getattr(self, "server_override", None) or self.PREREQ["server"]

    def deny_account(self, tool):
        """A new account with `tool` disabled for agents (a central deny rule no other
        scenario, nor another test run on this server, sees): start(..., server=it)."""
        try:
            other = self.PREREQ["server"].new_account("e2edeny")
            other.disable_tool(other.account_id, tool)
        except KitError as e:
            self.scenario = "%s e: central deny rule [%s]" % (self.HARNESS, self.label())
            raise ScenarioFailure(self.report("setting up the deny rule failed: %s" % e))
        return other

    def run_denied_shell(self, tool):
        """e: the harness's shell tool (`tool`) disabled by a central deny rule; the run,
        after checking that the denied command did not run."""
        other = self.deny_account(tool)
        self.start("e: central deny rule (%s disabled)" % tool, server=other)
        ran = os.path.join(self.sb.proj, "ran.txt")
        run = self.run_turns([self.shell_turn("echo ran > %s" % quote_path(ran)),
                              self.text_turn("Understood, it was blocked.")])
        self.check(not os.path.exists(ran), "the denied %s command ran (%s exists)" % (tool, ran))
        return run

    def prepare_mode(self, sb):
        self.agent = None
        self.agent = self.server().new_agent(kind=self.AGENT_KINDS.get(self.HARNESS, self.HARNESS))
        sb.hook_env = {"PRELOOP_URL": self.PREREQ["creds"]["base_url"], "PRELOOP_TOKEN": self.agent["agent_token"]}
        sb.mock_env = self.server().server_note_env()

    def note_before_start(self, body, **target):
        sent = self.server().send_note(body, **(target or {"agent_id": self.agent["agent_id"]}))
        self.check(isinstance(sent, dict) and sent.get("state") == "pending",
                   "POST /api/v1/operator-notes answered %r, want a pending note" % (sent,))
        return sent

    def note_to_run_argv(self, body):
        """before_reply_cmd sending a note to this run (external_session_id; "@@SESSION@@"
        when the harness picks its id: server_note.py reads it from the session file)."""
        return self.server().send_note_argv(body, external_session_id=self.sid or "@@SESSION@@")

    def check_sent_to_run(self, sent):
        self.check(sent.get("runtime_session_id"), "the note sent by external_session_id is bound to "
                   "no session (was the session registered by SessionStart?): %r" % sent)

    def receipt_now(self, note_id):
        return self.server().receipt(note_id)

    def operator_env(self):
        """The operator CLI against this server: its URL and the human's user token."""
        return {"PRELOOP_URL": self.PREREQ["creds"]["base_url"], "PRELOOP_USER_TOKEN": self.server().user_token}

    def wait_receipt(self, note_id, states):
        return self.server().wait_receipt(note_id, states, timeout=10.0)

    def receipt_where(self, note_id):
        return "GET /api/v1/operator-notes/%s" % note_id

    def check_binding(self, r, where):
        self.check(r.get("runtime_session_id"), "the note is bound to no runtime session; %s" % where)
        self.check(r.get("managed_agent_id") == self.agent["agent_id"],
                   "managed_agent_id is %r, want this scenario's agent %s; %s"
                   % (r.get("managed_agent_id"), self.agent["agent_id"], where))
        sent = self.sent.get(r.get("note_id")) or {}
        if sent.get("runtime_session_id"):
            self.check(r.get("runtime_session_id") == sent["runtime_session_id"],
                       "bound to session %r, sending answered %r; %s"
                       % (r.get("runtime_session_id"), sent["runtime_session_id"], where))

    def mode_lines(self):
        agent = getattr(self, "agent", None)
        return ["server %s, agent %s" % (self.PREREQ["creds"]["base_url"], agent["agent_id"])] if agent else []

    def mode_tail(self):
        lines = server_log_tail(15)
        return (["tail of the server log (%s/server.log):" % server_home()]
                + ["  " + l for l in lines]) if lines else []
