"""End-to-end against the REAL Preloop server: PyPI preloop==0.17.1 on 127.0.0.1 with its
PostgreSQL 16 + pgvector (brought up by e2e/preloop_server/up.sh in setUpModule), and the
real Claude Code 2.1.328 CLI headless against mock_anthropic.py, with the project's hooks
wired into a temporary HOME by `preloop-hooks install --harness claude-code --scope user`
(or, while this build has no `install`, by kit.Sandbox.write_settings) and running in
SERVER mode: PRELOOP_URL + PRELOOP_TOKEN (a fresh managed agent's agt_ runtime token per
scenario) in claude's, and so the hooks', environment.

Every scenario checks what the mock model received and the note's receipt on the server
(GET /api/v1/operator-notes/{id} with the user's personal API key):

  a   note to the agent (agent_id) before the run starts -> first model request,
      SessionStart label; receipt delivered / session_start, bound to the run's session
  a2  the same with next_session: true
  b   note to the run (external_session_id) while the mock answers request 0 with a Bash
      call -> request 1 (after the tool call), PreToolUse:Bash label; receipt delivered /
      pre_tool_use
  c   note to the run while the mock answers the final text-only turn -> rescued by Stop:
      exactly one extra request; receipt delivered / stop
  d   a second note sent during that rescue turn (no second rescue) -> reaches no request;
      receipt undeliverable / session_ended (the SessionEnd hook's session-end call)
  e   a central deny rule (Bash disabled account-wide through POST /tool-configurations,
      in an account of its own so no other scenario is affected) -> Bash is not run and the
      model gets tool_result is_error "PreToolUse:Bash hook error: Tool blocked in Preloop"

Codex 0.169.0 (`codex exec` against mock_openai.py, hooks wired by `preloop-hooks install
--harness codex --scope user`, class TestRealServerCodex): a-d as above, plus
  e   PermissionRequest (--approve-for-me, an escalated call) blocked on the server until a
      human approves through /approval-requests; a note sent meanwhile is claimed deferred
      (receipt `claimed`), carried by the next PreToolUse and acked (`delivered`)

If the server cannot come up, every test here FAILS (nothing is skipped), the first one
with up.sh's output and the server log's tail. tearDownModule stops the server again (down.sh, by PID) when
this run started it, unless PRELOOP_E2E_SERVER_KEEP=1. Run alone, from the repository root:
  python3 -m unittest -v e2e/test_real_server.py
"""

import json
import os
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kit  # noqa: E402

CLAUDE = None
BIN_DIR = None
CREDS = None
SERVER = None        # kit.ServerClient authenticated as the seeded operator (personal API key)

PROMPT = "Run echo hi"
BASH_TURN = {"content": [{"type": "text", "text": "Running it."},
                         {"type": "tool_use", "name": "Bash",
                          "input": {"command": "echo hi", "description": "say hi"}}]}
TERMINAL_STATES = {"delivered", "expired", "cancelled", "undeliverable"}
STOP_LABELS = {kit.LABEL_STOP_CONTEXT, kit.LABEL_STOP_FEEDBACK}
DENY_REASON = "Tool blocked in Preloop"


def setUpModule():
    global CLAUDE, BIN_DIR, CREDS, SERVER
    CLAUDE = kit.ensure_claude()
    BIN_DIR = kit.build_binaries()
    try:
        CREDS = kit.ensure_server()
    except kit.KitError as e:
        # Not a skip: every test of this module fails, the first one with up.sh's log.
        SERVER_ERROR["error"] = str(e)
        sys.stderr.write("[e2e] REAL SERVER DID NOT COME UP: every test/real-server scenario fails\n")
        return
    SERVER = kit.ServerClient(CREDS["base_url"], CREDS["user_token"])
    wiring = ("`preloop-hooks install --harness claude-code --scope user`"
              if kit.has_install_command(os.path.join(BIN_DIR, kit.CLI_BINARY))
              else "kit.Sandbox.write_settings (this preloop-hooks has no `install` yet)")
    sys.stderr.write("[e2e] real server: preloop %s at %s (up.sh took %ss); hooks wired by %s\n"
                     % (CREDS.get("preloop_version"), CREDS["base_url"], CREDS["up_s"], wiring))


SERVER_ERROR = {}


def require_server(test):
    """Fail (never skip) when setUpModule could not bring the server up."""
    if SERVER_ERROR.get("error"):
        if not SERVER_ERROR.get("shown"):
            SERVER_ERROR["shown"] = True
            test.fail("SCENARIO setup: %s" % SERVER_ERROR["error"])
        test.fail("SCENARIO setup: the real Preloop server did not come up (up.sh's log is in "
                  "the first failure of this module)")


def tearDownModule():
    # Leave the server as we found it: stop it (down.sh, by PID) only when this run
    # started it, unless PRELOOP_E2E_SERVER_KEEP=1 (then the next run finds it up: ~2 s).
    if CREDS and CREDS.get("started_server") and os.environ.get("PRELOOP_E2E_SERVER_KEEP") != "1":
        rc, out = kit.stop_server()
        sys.stderr.write("[e2e] stopped the Preloop server this run started (down.sh rc=%s)\n" % rc)
        if rc != 0:
            sys.stderr.write(out[-3000:] + "\n")


def text_turn(text, **extra):
    return dict({"content": [{"type": "text", "text": text}]}, **extra)


def is_stop_label(label):
    return label in STOP_LABELS or (label or "").startswith(kit.LABEL_STOP_BLOCKING_PREFIX)


class ScenarioFailure(AssertionError):
    pass


class _ServerScenarios:
    """Mixed into one TestCase per model (wire shape)."""

    MODEL = None
    MODEL_NAME = "default"
    CONTEXT_SHAPE = None

    # ------------------------------------------------------------------ plumbing
    def setUp(self):
        require_server(self)
        self.sb = None
        self.scenario = None
        self.run_result = None
        self.server = SERVER
        self.agent = None
        self.receipts = {}
        self.markers = []
        self.note_ids = []
        self.wiring = None

    def start(self, scenario, server=None):
        """A sandbox in server mode for a fresh managed agent of `server`'s account."""
        self.scenario = "%s [real server, model=%s]" % (scenario, self.MODEL_NAME)
        self.server = server or SERVER
        self.sb = kit.Sandbox("srv-%s-%s" % (scenario.split(":")[0], self.MODEL_NAME), BIN_DIR, CLAUDE)
        self.addCleanup(self.sb.close)
        try:
            self.agent = self.server.new_agent(kind="claude_code")
            self.wiring = self.sb.install_hooks("claude-code")
        except kit.KitError as e:
            raise ScenarioFailure(self.report("setup failed: %s" % e))
        self.sb.hook_env = {"PRELOOP_URL": CREDS["base_url"],
                            "PRELOOP_TOKEN": self.agent["agent_token"]}
        self.sb.mock_env = self.server.server_note_env()
        return self.sb

    def report(self, msg):
        sb, run = self.sb, self.run_result
        out = ["", "SCENARIO %s: %s" % (self.scenario, msg)]
        if sb:
            sb.keep = True
            out.append("artifacts kept in %s (requests.jsonl, claude.debug.log, cmdline.txt, "
                       "home/, preloop-home/)" % sb.root)
            out.append("hooks wired by: %s%s" % (
                {"install": "preloop-hooks install --harness claude-code --scope user",
                 "kit": "kit.Sandbox.write_settings"}.get(self.wiring, self.wiring),
                ("\n  install: " + kit.shorten(sb.install_output, 800)) if sb.install_output else ""))
        if self.agent:
            out.append("server %s, agent %s" % (CREDS["base_url"], self.agent["agent_id"]))
        if run:
            out.append("claude rc=%s timed_out=%s duration=%ss model requests=%d"
                       % (run.rc, run.timed_out, run.duration_s, len(run.requests)))
            out.append("claude stdout: " + kit.shorten(run.stdout, 600))
            if run.stderr.strip():
                out.append("claude stderr: " + kit.shorten(run.stderr, 600))
            for br in run.before_reply():
                out.append("mock before_reply_cmd: argv=%s rc=%s stdout=%s stderr=%s%s" % (
                    kit.shorten(" ".join(br.get("argv", [])), 300), br.get("rc"),
                    kit.shorten(br.get("stdout", ""), 500), kit.shorten(br.get("stderr", ""), 300),
                    (" error=" + br["error"]) if br.get("error") else
                    (" skipped=" + br["skipped"]) if br.get("skipped") else ""))
        for nid in self.note_ids:
            try:
                r = self.server.receipt(nid)   # fresh: the state now, not when last checked
            except Exception as e:   # noqa: BLE001 -- a dump must not hide the failure
                r = self.receipts.get(nid) or "unreadable: %s" % e
            out.append("receipt GET /api/v1/operator-notes/%s: %s" % (nid, json.dumps(r, ensure_ascii=False)))
        if run:
            out.append("model requests (shortened; markers: %s):" % ", ".join(self.markers))
            out.append(kit.summarize_requests(run.requests, self.markers))
        if sb:
            lines = sb.debug_log_hook_lines()
            if lines:
                out.append("hook lines from claude.debug.log:")
                out.extend("  " + l for l in lines)
            lines = sb.preloop_log_lines()
            if lines:
                out.append("PRELOOP_HOME/log:")
                out.extend("  " + l for l in lines)
        lines = kit.server_log_tail(15)
        if lines:
            out.append("tail of the server log (%s/server.log):" % kit.server_home())
            out.extend("  " + l for l in lines)
        return "\n".join(out)

    def check(self, cond, msg):
        if not cond:
            raise ScenarioFailure(self.report(msg))

    def run_claude(self, sid, script):
        self.sb.start_mock(script)
        try:
            self.run_result = self.sb.run_claude(PROMPT, sid, model=self.MODEL)
        finally:
            self.sb.mock.stop()
        run = self.run_result
        self.check(not run.timed_out and run.rc == 0,
                   "claude -p did not finish cleanly (rc=%s, timed out=%s)" % (run.rc, run.timed_out))
        self.check(isinstance(run.output, dict) and not run.output.get("is_error"),
                   "claude -p --output-format json did not report success")
        return run

    def send_before_start(self, body, **target):
        try:
            sent = self.server.send_note(body, **target)
        except kit.KitError as e:
            raise ScenarioFailure(self.report("sending the note failed: %s" % e))
        self.check(isinstance(sent, dict) and sent.get("note_id") and sent.get("state") == "pending",
                   "POST /api/v1/operator-notes answered %r, want a pending note" % (sent,))
        self.note_ids.append(sent["note_id"])
        return sent

    def sent_in_turn(self, run, turn):
        """The note id printed by the before_reply_cmd (server_note.py) the mock ran for `turn`."""
        recs = [r for r in run.records if r.get("before_reply")
                and r.get("reply", {}).get("turn") == turn and not r["before_reply"].get("skipped")]
        self.check(recs, "the mock never ran the before_reply_cmd of turn %d "
                         "(the conversation did not reach that turn)" % turn)
        br = recs[0]["before_reply"]
        try:
            sent = json.loads(br.get("stdout", ""))
        except ValueError:
            sent = None
        if isinstance(sent, dict) and sent.get("note_id"):
            self.note_ids.append(sent["note_id"])
        self.check(br.get("rc") == 0, "sending the note before answering turn %d failed: "
                   "server_note.py exited %s: %s %s" % (turn, br.get("rc"), br.get("stdout"), br.get("stderr")))
        self.check(isinstance(sent, dict) and sent.get("note_id"),
                   "server_note.py printed no JSON with note_id: %r" % br.get("stdout"))
        return sent

    def check_receipt(self, note_id, state, event=None, reason=None, session_bound=True):
        try:
            r = self.server.wait_receipt(note_id, TERMINAL_STATES, timeout=10.0)
        except kit.KitError as e:
            raise ScenarioFailure(self.report("reading the receipt failed: %s" % e))
        self.receipts[note_id] = r
        where = "receipt GET /api/v1/operator-notes/%s = %s" % (note_id, json.dumps(r, ensure_ascii=False))
        self.check(r.get("note_id") == note_id, "note_id mismatch in %s" % where)
        self.check(r.get("state") == state, "state is %r, want %r; %s" % (r.get("state"), state, where))
        if event is not None:
            self.check(r.get("delivery_event") == event and r.get("delivery_channel") == "hook",
                       "delivery_event/channel are %r/%r, want %r/'hook'; %s"
                       % (r.get("delivery_event"), r.get("delivery_channel"), event, where))
            self.check(r.get("delivered_at"), "no delivered_at; %s" % where)
        if reason is not None:
            self.check(r.get("undeliverable_reason") == reason,
                       "undeliverable_reason is %r, want %r; %s" % (r.get("undeliverable_reason"), reason, where))
        if session_bound:
            self.check(r.get("runtime_session_id"), "the note is bound to no runtime session; %s" % where)
        self.check(r.get("managed_agent_id") == self.agent["agent_id"],
                   "managed_agent_id is %r, want this scenario's agent %s; %s"
                   % (r.get("managed_agent_id"), self.agent["agent_id"], where))
        return r

    def check_framed(self, hit, note_id, body):
        """The text the model got is a full <operator-notes count="1"
        source="preloop-control-plane"> block (rendered by the server) holding exactly
        this note, body verbatim, auth="api_key" (sent with the personal API key)."""
        blocks = [b for b in kit.note_blocks(hit.text) if any(e["id"] == note_id for e in b[2])]
        self.check(blocks, "no complete <operator-notes ...> block holding note %s found in: %r"
                   % (note_id, kit.shorten(hit.text, 1500)))
        block, count, elements = blocks[0]
        self.check(count == 1 and len(elements) == 1,
                   "block has count=%d and %d <operator-note> elements, want 1 and 1: %r"
                   % (count, len(elements), kit.shorten(block, 1500)))
        self.check(elements[0]["body"] == body, "note body in the block is %r, want %r"
                   % (elements[0]["body"], body))
        self.check(elements[0]["auth"] == "api_key", "auth=%r in the block, want 'api_key': %r"
                   % (elements[0]["auth"], kit.shorten(block, 800)))
        return block, elements[0]

    def token(self, tag):
        t = "E2E-SRV-%s-%s" % (tag, kit.new_session_id()[:8])
        self.markers.append(t)
        return t

    def hits_for(self, run, marker):
        return kit.find_marker(run.requests, marker)

    def describe_hits(self, hits):
        return "; ".join(h.short(160) for h in hits) or "nowhere"

    def expect_first_request(self, run, tok, note_id, body):
        hits = self.hits_for(run, tok)
        first = kit.first_hit(hits)
        self.check(first is not None, "the note never reached the model")
        self.check(first.request_index == 0,
                   "first seen in request #%d, want #0: %s" % (first.request_index, first.short()))
        self.check(first.label == kit.LABEL_SESSION_START,
                   "label is %r, want %r" % (first.label, kit.LABEL_SESSION_START))
        self.check(first.shape == self.CONTEXT_SHAPE,
                   "wire shape is %r, want %r for this model" % (first.shape, self.CONTEXT_SHAPE))
        others = [h for h in hits if h.label != kit.LABEL_SESSION_START]
        self.check(not others, "delivered more than once / under another label: %s"
                   % self.describe_hits(others))
        self.check(len(run.requests) == 2, "%d model requests, want 2 (no Stop rescue when "
                                           "nothing is pending)" % len(run.requests))
        self.check_framed(first, note_id, body)

    # ------------------------------------------------------------------ scenarios
    def test_a_agent_note_before_start_reaches_first_request(self):
        self.start("a: note to the agent before the run starts")
        sid = kit.new_session_id()
        tok = self.token("A")
        body = "%s Before you start, print the working directory too." % tok
        note_id = self.send_before_start(body, agent_id=self.agent["agent_id"])["note_id"]
        run = self.run_claude(sid, {"turns": [BASH_TURN, text_turn("All done.")]})
        self.expect_first_request(run, tok, note_id, body)
        self.check_receipt(note_id, "delivered", event="session_start")

    def test_a2_next_session_note_before_start_reaches_first_request(self):
        self.start("a2: note to the agent's next session before the run starts")
        sid = kit.new_session_id()
        tok = self.token("A2")
        body = "%s For the next session of this agent." % tok
        sent = self.send_before_start(body, agent_id=self.agent["agent_id"], next_session=True)
        self.check(sent.get("next_session") is True, "send answered next_session=%r" % sent.get("next_session"))
        run = self.run_claude(sid, {"turns": [BASH_TURN, text_turn("All done.")]})
        self.expect_first_request(run, tok, sent["note_id"], body)
        self.check_receipt(sent["note_id"], "delivered", event="session_start")

    def test_b_note_mid_run_reaches_request_after_tool_call(self):
        self.start("b: note to the run sent mid-run")
        sid = kit.new_session_id()
        tok = self.token("B")
        body = "%s Mid-run: after this command, stop and summarise." % tok
        run = self.run_claude(sid, {"turns": [
            dict(BASH_TURN, before_reply_cmd=self.server.send_note_argv(body, external_session_id=sid)),
            text_turn("All done.")]})
        sent = self.sent_in_turn(run, 0)
        note_id = sent["note_id"]
        self.check(sent.get("runtime_session_id"), "the note sent by external_session_id is bound to "
                   "no session (was the session registered by SessionStart?): %r" % sent)

        hits = self.hits_for(run, tok)
        first = kit.first_hit(hits)
        self.check(first is not None, "the note never reached the model")
        self.check(first.request_index == 1, "first seen in request #%d, want #1 (the one after "
                                             "the Bash tool call): %s" % (first.request_index, first.short()))
        self.check(first.label == kit.LABEL_PRE_TOOL_USE_BASH,
                   "label is %r, want %r" % (first.label, kit.LABEL_PRE_TOOL_USE_BASH))
        self.check(first.shape == self.CONTEXT_SHAPE,
                   "wire shape is %r, want %r for this model" % (first.shape, self.CONTEXT_SHAPE))
        others = [h for h in hits if h.label != kit.LABEL_PRE_TOOL_USE_BASH]
        self.check(not others, "delivered more than once / under another label: %s"
                   % self.describe_hits(others))
        self.check(len(run.requests) == 2, "%d model requests, want 2 (no Stop rescue when "
                                           "nothing is pending)" % len(run.requests))
        self.check_framed(first, note_id, body)
        r = self.check_receipt(note_id, "delivered", event="pre_tool_use")
        self.check(r.get("runtime_session_id") == sent["runtime_session_id"],
                   "receipt bound to session %r, send answered %r"
                   % (r.get("runtime_session_id"), sent["runtime_session_id"]))

    def test_c_note_after_last_tool_call_rescued_by_stop(self):
        self.start("c: note to the run sent after the last tool call")
        sid = kit.new_session_id()
        tok = self.token("C")
        body = "%s Late note: also mention the exit code." % tok
        run = self.run_claude(sid, {"turns": [
            BASH_TURN,
            text_turn("All done.", before_reply_cmd=self.server.send_note_argv(body, external_session_id=sid)),
            text_turn("Noted the operator note.")]})
        note_id = self.sent_in_turn(run, 1)["note_id"]

        hits = self.hits_for(run, tok)
        first = kit.first_hit(hits)
        self.check(first is not None, "the note never reached the model (no Stop rescue)")
        self.check(len(run.requests) == 3, "%d model requests, want 3 (exactly one extra "
                                           "request from the Stop rescue)" % len(run.requests))
        self.check(first.request_index == 2,
                   "first seen in request #%d, want #2: %s" % (first.request_index, first.short()))
        stop_hits = [h for h in hits if is_stop_label(h.label)]
        self.check(stop_hits, "not under a Stop label (%s): %s"
                   % (sorted(STOP_LABELS), self.describe_hits(hits)))
        others = [h for h in hits if not is_stop_label(h.label)]
        self.check(not others, "also delivered under another label: %s" % self.describe_hits(others))
        self.check_framed(stop_hits[0], note_id, body)
        self.check_receipt(note_id, "delivered", event="stop")

    def test_d_note_pending_at_end_is_undeliverable_session_ended(self):
        self.start("d: note to the run still pending when the run ends")
        sid = kit.new_session_id()
        tok_a, tok_b = self.token("D1"), self.token("D2")
        body_a = "%s Late note that Stop rescues." % tok_a
        body_b = "%s Note sent during the rescue turn, too late." % tok_b
        run = self.run_claude(sid, {"turns": [
            BASH_TURN,
            text_turn("All done.", before_reply_cmd=self.server.send_note_argv(body_a, external_session_id=sid)),
            text_turn("Noted.", before_reply_cmd=self.server.send_note_argv(body_b, external_session_id=sid)),
        ], "overflow": text_turn("Nothing more to do.")})
        note_a = self.sent_in_turn(run, 1)["note_id"]
        note_b = self.sent_in_turn(run, 2)["note_id"]   # fails if there was no rescue turn

        self.check(len(run.requests) == 3, "%d model requests, want 3 (one Stop rescue, then "
                                           "stop_hook_active=true ends the run)" % len(run.requests))
        hits_b = self.hits_for(run, tok_b)
        self.check(not hits_b, "the note sent during the rescue turn reached the model: %s"
                   % self.describe_hits(hits_b))
        self.check(self.hits_for(run, tok_a), "the rescued note (prerequisite) is not in any request")
        self.check_receipt(note_a, "delivered", event="stop")
        r = self.check_receipt(note_b, "undeliverable", reason="session_ended")
        self.check(r.get("delivered_at") is None, "an undeliverable note has delivered_at: %r" % r)

    def test_e_central_deny_rule_denies_tool_and_reason_reaches_model(self):
        # Bash disabled account-wide: in an account of its own, so no other scenario (and
        # no other test run on this server) sees the rule.
        try:
            other = SERVER.new_account("e2edeny")
            other.disable_tool(other.account_id, "Bash")
        except kit.KitError as e:
            self.scenario = "e: central deny rule [real server, model=%s]" % self.MODEL_NAME
            raise ScenarioFailure(self.report("setting up the deny rule failed: %s" % e))
        sb = self.start("e: central deny rule (Bash disabled)", server=other)
        sid = kit.new_session_id()
        marker_file = os.path.join(sb.proj, "bash-ran.txt")
        deny_turn = {"content": [{"type": "text", "text": "Running it."},
                                 {"type": "tool_use", "name": "Bash",
                                  "input": {"command": "echo ran > %s" % marker_file,
                                            "description": "write a file"}}]}
        run = self.run_claude(sid, {"turns": [deny_turn, text_turn("Understood, it was blocked.")]})

        self.check(not os.path.exists(marker_file), "the denied Bash command ran (%s exists)" % marker_file)
        self.check(len(run.requests) == 2, "%d model requests, want 2" % len(run.requests))
        results = [b for m in run.requests[1].get("messages") or [] if m.get("role") == "user"
                   and isinstance(m.get("content"), list)
                   for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_result"]
        self.check(results, "request #1 holds no tool_result")
        res = results[-1]
        content = res.get("content")
        if isinstance(content, list):
            content = "\n".join(x.get("text", "") for x in content if isinstance(x, dict))
        self.check(res.get("is_error") is True and DENY_REASON in (content or ""),
                   "the tool_result is %r, want is_error=true holding the server's reason %r"
                   % (res, DENY_REASON))
        self.check(content.startswith("PreToolUse:Bash hook error: "),
                   "the deny did not come from our PreToolUse hook: %r" % content)


class TestRealServerClaudeCodeDefaultModel(_ServerScenarios, unittest.TestCase):
    """Claude Code's default model (claude-opus-5-5): hook text in role:"system" messages."""
    MODEL = kit.MODEL_DEFAULT
    MODEL_NAME = "default"
    CONTEXT_SHAPE = "system_message"


class TestRealServerClaudeCodeSonnet45(_ServerScenarios, unittest.TestCase):
    """--model claude-sonnet-4-5-20250929: hook text in <system-reminder> blocks."""
    MODEL = kit.MODEL_SONNET_45
    MODEL_NAME = "sonnet-4-5"
    CONTEXT_SHAPE = "system_reminder"


# =============================================================================== Codex

CODEX_PROMPT = "say hi"
CODEX_SHELL_TURN = {"calls": [{"cmd": "echo hi"}]}


class TestRealServerCodex(unittest.TestCase):
    """The real Codex CLI 0.169.0 (`codex exec`) against mock_openai.py (Responses API),
    hooks wired by `preloop-hooks install --harness codex --scope user` (hooks.json + the
    trust entries in $CODEX_HOME/config.toml), server mode. Codex picks its own session id:
    notes to the run use the id the SessionStart hook registered (server_note.py
    "@@SESSION@@", read from the hooks' session file)."""

    CODEX = None

    @classmethod
    def setUpClass(cls):
        cli = os.path.join(BIN_DIR, kit.CLI_BINARY)
        missing = [b for b in ("preloop-codex-session-start", "preloop-codex-pre-tool-use",
                               "preloop-codex-permission-request", "preloop-codex-stop",
                               "preloop-codex-session-end")
                   if not os.access(os.path.join(BIN_DIR, b), os.X_OK)]
        if missing or not kit.has_install_command(cli):
            raise AssertionError("SCENARIO codex setup: the Codex hooks (%s) or `preloop-hooks "
                                 "install` are missing in %s" % (", ".join(missing) or "present", BIN_DIR))
        cls.CODEX = kit.ensure_codex()

    def setUp(self):
        require_server(self)
        self.sb = None
        self.scenario = None
        self.run_result = None
        self.agent = None
        self.note_ids = []
        self.markers = []
        self.extra = []

    def start(self, scenario, script, approve_for_me=False):
        self.scenario = "codex %s [real server]" % scenario
        self.sb = kit.Sandbox("srv-codex-%s" % scenario.split(":")[0], BIN_DIR, None)
        self.addCleanup(self.sb.close)
        try:
            self.agent = SERVER.new_agent(kind="codex")
            self.sb.hook_env = {"PRELOOP_URL": CREDS["base_url"], "PRELOOP_TOKEN": self.agent["agent_token"]}
            self.sb.mock_env = SERVER.server_note_env()
            self.sb.start_codex_mock(script)
            self.sb.write_codex_config(approve_for_me=approve_for_me)
            self.sb.install_hooks("codex")
        except kit.KitError as e:
            raise ScenarioFailure(self.report("setup failed: %s" % e))
        return self.sb

    def report(self, msg):
        sb, run = self.sb, self.run_result
        out = ["", "SCENARIO %s: %s" % (self.scenario, msg)]
        if sb:
            sb.keep = True
            out.append("artifacts kept in %s (requests.jsonl, codex.stderr, cmdline.txt, codex-home/, "
                       "preloop-home/)" % sb.root)
            if sb.install_output:
                out.append("install: " + kit.shorten(sb.install_output, 800))
        if self.agent:
            out.append("server %s, agent %s" % (CREDS["base_url"], self.agent["agent_id"]))
        out.extend(self.extra)
        if run:
            out.append("codex rc=%s timed_out=%s duration=%ss session=%s model requests=%d"
                       % (run.rc, run.timed_out, run.duration_s, run.session_id, len(run.requests)))
            hook_lines = [l for l in run.stderr.splitlines() if l.startswith("hook: ") or "warning" in l.lower()]
            out.append("codex stderr (hook status lines): " + " | ".join(hook_lines[-30:]))
            if getattr(run, "during", None):
                out.append("during the run: " + kit.shorten(json.dumps(run.during, ensure_ascii=False), 1500))
            for br in run.before_reply():
                out.append("mock before_reply_cmd: argv=%s rc=%s stdout=%s stderr=%s" % (
                    kit.shorten(" ".join(br.get("argv", [])), 300), br.get("rc"),
                    kit.shorten(br.get("stdout", ""), 500), kit.shorten(br.get("stderr", ""), 300)))
        for nid in self.note_ids:
            try:
                r = SERVER.receipt(nid)
            except Exception as e:   # noqa: BLE001
                r = "unreadable: %s" % e
            out.append("receipt GET /api/v1/operator-notes/%s: %s" % (nid, json.dumps(r, ensure_ascii=False)))
        if run:
            out.append("model requests (new items only; markers: %s):" % ", ".join(self.markers))
            out.append(kit.summarize_codex_requests(run.requests, self.markers))
        if sb:
            lines = sb.preloop_log_lines()
            if lines:
                out.append("PRELOOP_HOME/log:")
                out.extend("  " + l for l in lines)
        lines = kit.server_log_tail(10)
        if lines:
            out.append("tail of the server log:")
            out.extend("  " + l for l in lines)
        return "\n".join(out)

    def check(self, cond, msg):
        if not cond:
            raise ScenarioFailure(self.report(msg))

    def token(self, tag):
        t = "E2E-CX-%s-%s" % (tag, kit.new_session_id()[:8])
        self.markers.append(t)
        return t

    def run_codex(self, prompt=CODEX_PROMPT, **kw):
        try:
            self.run_result = self.sb.run_codex(self.CODEX, prompt, **kw)
        finally:
            self.sb.mock.stop()
        run = self.run_result
        self.check(not run.timed_out and run.rc == 0,
                   "codex exec did not finish cleanly (rc=%s, timed out=%s)" % (run.rc, run.timed_out))
        self.check(run.session_id, "no session file in PRELOOP_HOME/sessions: SessionStart registered nothing")
        return run

    def sent_in_turn(self, run, turn):
        recs = [r for r in run.records if r.get("before_reply")
                and r.get("reply", {}).get("turn") == turn and not r["before_reply"].get("skipped")]
        self.check(recs, "the mock never ran the before_reply_cmd of turn %d" % turn)
        br = recs[0]["before_reply"]
        try:
            sent = json.loads(br.get("stdout", ""))
        except ValueError:
            sent = None
        if isinstance(sent, dict) and sent.get("note_id"):
            self.note_ids.append(sent["note_id"])
        self.check(br.get("rc") == 0 and isinstance(sent, dict),
                   "before_reply_cmd of turn %d failed: rc=%s %s %s"
                   % (turn, br.get("rc"), br.get("stdout"), br.get("stderr")))
        return sent

    def check_receipt(self, note_id, state, event=None, reason=None):
        r = SERVER.wait_receipt(note_id, TERMINAL_STATES, timeout=10.0)
        where = "receipt GET /api/v1/operator-notes/%s = %s" % (note_id, json.dumps(r, ensure_ascii=False))
        self.check(r.get("state") == state, "state is %r, want %r; %s" % (r.get("state"), state, where))
        if event is not None:
            self.check(r.get("delivery_event") == event and r.get("delivery_channel") == "hook",
                       "delivery_event/channel are %r/%r, want %r/'hook'; %s"
                       % (r.get("delivery_event"), r.get("delivery_channel"), event, where))
        if reason is not None:
            self.check(r.get("undeliverable_reason") == reason,
                       "undeliverable_reason is %r, want %r; %s" % (r.get("undeliverable_reason"), reason, where))
        self.check(r.get("managed_agent_id") == self.agent["agent_id"] and r.get("runtime_session_id"),
                   "not bound to this scenario's agent and a session; %s" % where)
        return r

    def check_block(self, text, note_id, body):
        import html
        text = html.unescape(text)   # Codex escapes a Stop reason inside <hook_prompt>
        blocks = [b for b in kit.note_blocks(text) if any(e["id"] == note_id for e in b[2])]
        self.check(blocks and blocks[0][1] == 1 and blocks[0][2][0]["body"] == body,
                   "no <operator-notes count=\"1\"> block holding note %s with body %r in %r"
                   % (note_id, body, kit.shorten(text, 1500)))

    def first_hit(self, run, tok):
        hits = kit.codex_find_marker(run.requests, tok)
        self.check(hits, "the note (%s) never reached the model" % tok)
        return hits[0], hits

    # ------------------------------------------------------------------ scenarios
    def test_a_agent_note_before_start_reaches_first_request(self):
        tok = self.token("A")
        body = "%s Before you start, print the working directory too." % tok
        self.start("a: note to the agent before the run starts",
                   {"agents": [{"name": "main", "turns": [CODEX_SHELL_TURN, {"text": "All done."}]}]})
        sent = SERVER.send_note(body, agent_id=self.agent["agent_id"])
        self.note_ids.append(sent["note_id"])
        run = self.run_codex()
        (n, i, role, txt), hits = self.first_hit(run, tok)
        self.check(n == 0 and role == "developer",
                   "first seen in request #%d item %d role %s, want request #0 in a developer message" % (n, i, role))
        prompt_at = [j for j, r, t in kit.codex_segments(run.requests[0]) if r == "user" and t.strip() == CODEX_PROMPT]
        self.check(prompt_at and i < prompt_at[0], "the SessionStart context (item %d) is not before the "
                   "user prompt (items %s)" % (i, prompt_at))
        self.check(len({(j) for _, j, _, _ in hits}) == 1, "delivered more than once: %s"
                   % [(a, b, c) for a, b, c, _ in hits])
        self.check(len(run.requests) == 2, "%d model requests, want 2" % len(run.requests))
        self.check_block(txt, sent["note_id"], body)
        self.check_receipt(sent["note_id"], "delivered", event="session_start")

    def test_b_note_mid_run_reaches_request_after_tool_call(self):
        tok = self.token("B")
        body = "%s Mid-run: after this command, stop and summarise." % tok
        self.start("b: note to the run sent mid-run", {"agents": [{"name": "main", "turns": [
            dict(CODEX_SHELL_TURN, before_reply_cmd=SERVER.send_note_argv(body, external_session_id="@@SESSION@@")),
            {"text": "All done."}]}]})
        run = self.run_codex()
        sent = self.sent_in_turn(run, 0)
        self.check(sent.get("note_id"), "server_note.py printed no note_id: %r" % sent)
        (n, i, role, txt), hits = self.first_hit(run, tok)
        items = run.requests[n].get("input") or []
        self.check(n == 1 and role == "developer",
                   "first seen in request #%d role %s, want request #1 (after the tool ran), developer" % (n, role))
        self.check(items[i - 1].get("type") == "function_call"
                   and any(it.get("type") == "function_call_output" for it in items[i + 1:]),
                   "the PreToolUse context (item %d) is not between the function_call and its output" % i)
        self.check(len(run.requests) == 2, "%d model requests, want 2 (no Stop rescue)" % len(run.requests))
        self.check_block(txt, sent["note_id"], body)
        self.check_receipt(sent["note_id"], "delivered", event="pre_tool_use")

    def test_c_note_after_last_tool_call_rescued_by_stop(self):
        tok = self.token("C")
        body = "%s Late note: also mention the exit code." % tok
        self.start("c: note to the run sent after the last tool call", {"agents": [{"name": "main", "turns": [
            CODEX_SHELL_TURN,
            {"text": "All done.", "before_reply_cmd": SERVER.send_note_argv(body, external_session_id="@@SESSION@@")},
            {"text": "Noted the operator note."}]}]})
        run = self.run_codex()
        sent = self.sent_in_turn(run, 1)
        (n, i, role, txt), hits = self.first_hit(run, tok)
        self.check(len(run.requests) == 3, "%d model requests, want 3 (one Stop rescue)" % len(run.requests))
        self.check(n == 2 and role == "user" and txt.startswith("<hook_prompt hook_run_id=\"stop:"),
                   "first seen in request #%d role %s as %r, want request #2, a user <hook_prompt "
                   "hook_run_id=\"stop:...\"> message" % (n, role, kit.shorten(txt, 200)))
        self.check_block(txt, sent["note_id"], body)
        self.check_receipt(sent["note_id"], "delivered", event="stop")

    def test_d_note_pending_at_end_is_undeliverable_session_ended(self):
        tok_a, tok_b = self.token("D1"), self.token("D2")
        body_a = "%s Late note that Stop rescues." % tok_a
        body_b = "%s Note sent during the rescue turn, too late." % tok_b
        self.start("d: note to the run still pending when the run ends", {"agents": [{"name": "main", "turns": [
            CODEX_SHELL_TURN,
            {"text": "All done.", "before_reply_cmd": SERVER.send_note_argv(body_a, external_session_id="@@SESSION@@")},
            {"text": "Noted.", "before_reply_cmd": SERVER.send_note_argv(body_b, external_session_id="@@SESSION@@")}],
            "overflow": {"text": "Nothing more to do."}}]})
        run = self.run_codex()
        note_a = self.sent_in_turn(run, 1)["note_id"]
        note_b = self.sent_in_turn(run, 2)["note_id"]
        self.check(len(run.requests) == 3, "%d model requests, want 3 (one Stop rescue, then "
                                           "stop_hook_active=true ends the run)" % len(run.requests))
        self.check(not kit.codex_find_marker(run.requests, tok_b), "the note sent during the rescue turn "
                   "reached the model")
        self.check(kit.codex_find_marker(run.requests, tok_a), "the rescued note (prerequisite) is in no request")
        self.check_receipt(note_a, "delivered", event="stop")
        r = self.check_receipt(note_b, "undeliverable", reason="session_ended")
        self.check(r.get("delivered_at") is None, "an undeliverable note has delivered_at: %r" % r)

    def test_e_permission_request_approved_by_human_with_deferred_note(self):
        # PreToolUse -> PermissionRequest (escalated call, `codex exec --approve-for-me`):
        # the hook's permission-check blocks on the server until a human approves through
        # /approval-requests. A note sent while it waits is claimed DEFERRED with the
        # decision (PermissionRequest cannot carry text), spooled, carried by the next
        # PreToolUse and acked: the receipt reads `claimed` in between, `delivered` after.
        tok = self.token("PR")
        body = "%s Sent while the approval was pending." % tok
        id_file = os.path.join(tempfile.gettempdir(), "preloop-e2e-pr-note-%s" % kit.new_session_id())
        self.addCleanup(lambda: os.path.exists(id_file) and os.unlink(id_file))
        self.start("e: PermissionRequest approved by a human, note deferred then acked", {
            "approve_for_me": True,
            "agents": [{"name": "main", "turns": [
                {"calls": [{"cmd": "touch escalated_file", "sandbox_permissions": "require_escalated",
                            "justification": "need to write"}]},
                {"calls": [{"cmd": "echo two"}], "before_reply_cmd": SERVER.receipt_argv("@" + id_file)},
                {"text": "All done."}], "overflow": {"text": "Nothing more."}}]}, approve_for_me=True)
        agent_id = self.agent["agent_id"]

        def human(proc):
            """Wait for the approval request, send the note, then approve."""
            deadline = time.time() + 60
            while time.time() < deadline and proc.poll() is None:
                mine = SERVER.pending_approvals(agent_id)
                if mine:
                    sid = self.sb.session_ids()[-1]
                    note = SERVER.send_note(body, external_session_id=sid)
                    with open(id_file, "w") as f:
                        f.write(note["note_id"])
                    time.sleep(0.3)
                    at_wait = SERVER.receipt(note["note_id"])
                    SERVER.approve(mine[0]["id"], "approved by the e2e human")
                    return {"note_id": note["note_id"], "approval_id": mine[0]["id"],
                            "tool_args": mine[0].get("tool_args"), "receipt_while_waiting": at_wait}
                time.sleep(0.25)
            return {"error": "no pending approval request for agent %s appeared" % agent_id}

        run = self.run_codex("make the file", approve_for_me=True, during=human)
        got = run.during.get("value") or {}
        self.check(got.get("note_id"), "the human never saw an approval request: %r" % run.during)
        note_id = got["note_id"]
        self.note_ids.append(note_id)
        self.check(got["receipt_while_waiting"].get("state") == "pending",
                   "while the hook waited the note was %r, want pending" % got["receipt_while_waiting"])
        self.check(os.path.exists(os.path.join(self.sb.proj, "escalated_file")),
                   "the approved escalated command did not run (no escalated_file)")
        self.check("hook: PermissionRequest Completed" in run.stderr,
                   "no `hook: PermissionRequest Completed` status line")
        recs = [r for r in run.records if r.get("before_reply") and r.get("reply", {}).get("turn") == 1]
        self.check(recs, "the mock never reached turn 1 (the request after the escalated call)")
        try:
            between = json.loads(recs[0]["before_reply"].get("stdout") or "")
        except ValueError:
            between = None
        self.extra.append("receipt read before turn 1 was answered: %s" % json.dumps(between))
        self.check(isinstance(between, dict) and between.get("state") == "claimed"
                   and between.get("delivered_at") is None,
                   "after the approval (deferred claim) and before the next PreToolUse the receipt "
                   "should be claimed with no delivered_at: %r" % between)
        (n, i, role, txt), hits = self.first_hit(run, tok)
        self.check(n == 2 and role == "developer",
                   "first seen in request #%d role %s, want request #2 (after the next tool call, "
                   "carried by its PreToolUse), developer" % (n, role))
        self.check_block(txt, note_id, body)
        r = self.check_receipt(note_id, "delivered", event="pre_tool_use")
        self.check(r.get("delivered_at") and r.get("claimed_at") and r["delivered_at"] > r["claimed_at"],
                   "delivered_at should come after claimed_at (delivered only at the ack): %r" % r)


if __name__ == "__main__":
    unittest.main()
