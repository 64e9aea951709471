"""End-to-end, LOCAL mode, Codex: the real Codex CLI 0.169.0 headless (`codex exec`)
against mock_openai.py (the project's mock of the OpenAI Responses API), with the
project's Codex hooks wired into a temporary HOME / CODEX_HOME by
`preloop-hooks install --harness codex --scope user` (hooks.json + the trust entries in
$CODEX_HOME/config.toml). No PRELOOP_URL / PRELOOP_TOKEN anywhere: PRELOOP_HOME is a temp
dir, notes go through the local file inbox (`preloop-hooks notes send`), receipts are
read with `preloop-hooks notes status <id> --json`.

Codex picks its own session id, so a note to "the run" is sent by the mock (a turn's
before_reply_cmd) through with_session.py, which replaces "@@SESSION@@" with the id the
SessionStart hook registered in $PRELOOP_HOME/sessions/*.json.

Scenarios (class TestCodexLocal), each checking what the mock model received and the
local receipt:
  a  `notes send --next codex` before the run starts -> request #0, a developer message
     (SessionStart additionalContext) before the user prompt, once; receipt delivered /
     session_start, bound to the run's session
  b  note to the run (--session <id>) while the mock answers request #0 with a shell call
     -> request #1, a developer message between the function_call and its output
     (PreToolUse); receipt delivered / pre_tool_use
  c  note to the run while the mock answers the final text-only turn -> Stop rescue: one
     extra request ending with a user <hook_prompt hook_run_id="stop:..."> message
     (Codex HTML-escapes it); receipt delivered / stop
  d  as c, then a second note during the rescue turn (the next Stop has
     stop_hook_active=true: no second rescue) -> in no request; receipt undeliverable /
     session_ended (local SessionEnd)
  e  `codex exec --approve-for-me` + an escalated call: PermissionRequest fires, our hook
     prints no decision in local mode (Codex's own flow decides: the mock's guardian is
     asked and allows, the command runs)

Run from the repository root:
  python3 -m unittest -v e2e/test_codex_local.py
"""

import html
import json
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kit  # noqa: E402

CODEX = None
BIN_DIR = None
SETUP_ERROR = {}

PROMPT = "say hi"
SHELL_TURN = {"calls": [{"cmd": "echo hi"}]}
TERMINAL_STATES = {"delivered", "expired", "cancelled", "undeliverable"}
CODEX_HOOK_BINARIES = ("preloop-codex-session-start", "preloop-codex-user-prompt-submit",
                       "preloop-codex-pre-tool-use", "preloop-codex-permission-request",
                       "preloop-codex-stop", "preloop-codex-session-end")
WITH_SESSION = os.path.join(kit.E2E_DIR, "with_session.py")


def setUpModule():
    global CODEX, BIN_DIR
    BIN_DIR = kit.build_binaries()
    missing = [b for b in CODEX_HOOK_BINARIES if not os.access(os.path.join(BIN_DIR, b), os.X_OK)]
    if missing or not kit.has_install_command(os.path.join(BIN_DIR, kit.CLI_BINARY)):
        # Not a skip: every test of this module fails with this message.
        SETUP_ERROR["error"] = ("the Codex hooks (%s) or `preloop-hooks install` are missing in %s"
                                % (", ".join(missing) or "all present", BIN_DIR))
        return
    CODEX = kit.ensure_codex()


class ScenarioFailure(AssertionError):
    pass


class TestCodexLocal(unittest.TestCase):
    """Codex 0.169.0 `codex exec`, hooks installed by `preloop-hooks install --harness
    codex --scope user`, local mode."""

    # ------------------------------------------------------------------ plumbing
    def setUp(self):
        if SETUP_ERROR.get("error"):
            self.fail("SCENARIO codex local setup: " + SETUP_ERROR["error"])
        self.sb = None
        self.scenario = None
        self.run_result = None
        self.note_ids = []
        self.markers = []
        self.extra = []

    def start(self, scenario, script, approve_for_me=False):
        self.scenario = "codex %s [local]" % scenario
        self.sb = kit.Sandbox("cx-local-%s" % scenario.split(":")[0], BIN_DIR, None)
        self.addCleanup(self.sb.close)
        try:
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
            out.append("artifacts kept in %s (requests.jsonl, codex.stdout, codex.stderr, "
                       "cmdline.txt, codex-home/, preloop-home/)" % sb.root)
            if sb.install_output:
                out.append("install: " + kit.shorten(sb.install_output, 800))
        out.extend(self.extra)
        if run:
            out.append("codex rc=%s timed_out=%s duration=%ss session=%s model requests=%d "
                       "(all /v1/responses: %d)"
                       % (run.rc, run.timed_out, run.duration_s, run.session_id, len(run.requests),
                          len([r for r in run.records if r.get("route") == "responses"])))
            hook_lines = [l for l in run.stderr.splitlines()
                          if l.startswith("hook: ") or "warning" in l.lower() or "error" in l.lower()]
            out.append("codex stderr (hook status lines): " + " | ".join(hook_lines[-30:]))
            out.append("codex stdout: " + kit.shorten(run.stdout, 400))
            for br in run.before_reply():
                out.append("mock before_reply_cmd: argv=%s rc=%s stdout=%s stderr=%s%s" % (
                    kit.shorten(" ".join(br.get("argv", [])), 300), br.get("rc"),
                    kit.shorten(br.get("stdout", ""), 400), kit.shorten(br.get("stderr", ""), 300),
                    (" error=" + br["error"]) if br.get("error") else
                    (" skipped=" + br["skipped"]) if br.get("skipped") else ""))
        for nid in self.note_ids:
            try:
                r = sb.note_status(nid)   # fresh: the state now
            except Exception as e:   # noqa: BLE001 -- a dump must not hide the failure
                r = "unreadable: %s" % e
            out.append("receipt `notes status %s --json`: %s" % (nid, json.dumps(r, ensure_ascii=False)))
        if run:
            out.append("model requests (new items only; markers: %s):" % ", ".join(self.markers))
            out.append(kit.summarize_codex_requests(run.requests, self.markers))
        if sb:
            lines = sb.preloop_log_lines()
            if lines:
                out.append("PRELOOP_HOME/log:")
                out.extend("  " + l for l in lines)
        return "\n".join(out)

    def check(self, cond, msg):
        if not cond:
            raise ScenarioFailure(self.report(msg))

    def token(self, tag):
        t = "E2E-CXL-%s-%s" % (tag, kit.new_session_id()[:8])
        self.markers.append(t)
        return t

    def note_to_run_argv(self, text):
        """before_reply_cmd: `preloop-hooks notes send --session <this run's id> --json TEXT`."""
        return [sys.executable, WITH_SESSION, os.path.join(BIN_DIR, kit.CLI_BINARY),
                "notes", "send", "--session", "@@SESSION@@", "--json", text]

    def run_codex(self, prompt=PROMPT, **kw):
        try:
            self.run_result = self.sb.run_codex(CODEX, prompt, **kw)
        finally:
            self.sb.mock.stop()
        run = self.run_result
        self.check(not run.timed_out and run.rc == 0,
                   "codex exec did not finish cleanly (rc=%s, timed out=%s)" % (run.rc, run.timed_out))
        self.check(run.session_id, "no session file in PRELOOP_HOME/sessions: SessionStart registered nothing")
        return run

    def sent_in_turn(self, run, turn):
        """The `notes send --json` answer the mock's before_reply_cmd printed for `turn`."""
        recs = [r for r in run.records if r.get("before_reply")
                and r.get("reply", {}).get("turn") == turn and not r["before_reply"].get("skipped")]
        self.check(recs, "the mock never ran the before_reply_cmd of turn %d (the conversation "
                         "did not reach that turn)" % turn)
        br = recs[0]["before_reply"]
        try:
            sent = json.loads(br.get("stdout", ""))
        except ValueError:
            sent = None
        if isinstance(sent, dict) and sent.get("note_id"):
            self.note_ids.append(sent["note_id"])
        self.check(br.get("rc") == 0 and isinstance(sent, dict) and sent.get("note_id"),
                   "sending the note before answering turn %d failed: rc=%s stdout=%r stderr=%r"
                   % (turn, br.get("rc"), br.get("stdout"), br.get("stderr")))
        self.check((sent.get("target") or {}).get("session") == self.run_result.session_id,
                   "the note of turn %d was not addressed to this run's session %s: %r"
                   % (turn, self.run_result.session_id, sent))
        return sent

    def check_receipt(self, note_id, state, event=None, reason=None):
        try:
            r = self.sb.wait_note_state(note_id, TERMINAL_STATES, timeout=8.0)
        except kit.KitError as e:
            raise ScenarioFailure(self.report("reading the receipt failed: %s" % e))
        where = "receipt `notes status %s --json` = %s" % (note_id, json.dumps(r, ensure_ascii=False))
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
            self.check(r.get("delivered_at") is None, "an undeliverable note has delivered_at; %s" % where)
        self.check(r.get("external_session_id") == self.run_result.session_id,
                   "bound to session %r, want this run's %r; %s"
                   % (r.get("external_session_id"), self.run_result.session_id, where))
        return r

    def check_block(self, text, note_id, body):
        """A full <operator-notes count="1" source="preloop-control-plane"> block holding
        exactly this note, body verbatim, auth="local"."""
        text = html.unescape(text)   # Codex escapes a Stop reason inside <hook_prompt>
        blocks = [b for b in kit.note_blocks(text) if any(e["id"] == note_id for e in b[2])]
        self.check(blocks, "no complete <operator-notes ...> block holding note %s in %r"
                   % (note_id, kit.shorten(text, 1500)))
        _, count, elements = blocks[0]
        self.check(count == 1 and len(elements) == 1 and elements[0]["body"] == body
                   and elements[0]["auth"] == "local",
                   "want count=1, one <operator-note auth=\"local\"> with body %r; got count=%d %r"
                   % (body, count, elements))

    def first_hit(self, run, tok):
        hits = kit.codex_find_marker(run.requests, tok)
        self.check(hits, "the note (%s) never reached the model" % tok)
        return hits[0], hits

    def check_once(self, hits):
        """Present in one input item only (later requests repeat the history)."""
        self.check(len({i for _, i, _, _ in hits}) == 1,
                   "delivered more than once: at (request, item, role) %s"
                   % [(n, i, role) for n, i, role, _ in hits])

    # ------------------------------------------------------------------ scenarios
    def test_a_note_before_start_reaches_first_request(self):
        tok = self.token("A")
        body = "%s Before you start, print the working directory too." % tok
        self.start("a: note to the next codex session, sent before the run starts",
                   {"agents": [{"name": "main", "turns": [SHELL_TURN, {"text": "All done."}]}]})
        try:
            sent = self.sb.cli_json("notes", "send", "--next", "codex", "--json", body)
        except kit.KitError as e:
            raise ScenarioFailure(self.report("notes send --next codex failed: %s" % e))
        self.note_ids.append(sent["note_id"])
        pending = self.sb.note_status(sent["note_id"])
        self.check(pending.get("state") == "pending", "before the run the note is %r, want pending" % pending)
        run = self.run_codex()
        (n, i, role, txt), hits = self.first_hit(run, tok)
        self.check(n == 0 and role == "developer",
                   "first seen in request #%d item %d role %s, want request #0 in a developer message"
                   % (n, i, role))
        prompt_at = [j for j, r, t in kit.codex_segments(run.requests[0])
                     if r == "user" and t.strip() == PROMPT]
        self.check(prompt_at and i < prompt_at[0], "the SessionStart context (item %d) is not before "
                   "the user prompt (items %s)" % (i, prompt_at))
        self.check_once(hits)
        self.check(len(run.requests) == 2, "%d model requests, want 2 (no Stop rescue when nothing "
                                           "is pending)" % len(run.requests))
        self.check_block(txt, sent["note_id"], body)
        self.check_receipt(sent["note_id"], "delivered", event="session_start")

    def test_b_note_mid_run_reaches_request_after_tool_call(self):
        tok = self.token("B")
        body = "%s Mid-run: after this command, stop and summarise." % tok
        self.start("b: note to the run sent mid-run (while the mock answers with a shell call)",
                   {"agents": [{"name": "main", "turns": [
                       dict(SHELL_TURN, before_reply_cmd=self.note_to_run_argv(body)),
                       {"text": "All done."}]}]})
        run = self.run_codex()
        sent = self.sent_in_turn(run, 0)
        (n, i, role, txt), hits = self.first_hit(run, tok)
        items = run.requests[n].get("input") or []
        self.check(n == 1 and role == "developer",
                   "first seen in request #%d role %s, want request #1 (after the tool ran), developer"
                   % (n, role))
        self.check(items[i - 1].get("type") == "function_call"
                   and any(it.get("type") == "function_call_output" for it in items[i + 1:]),
                   "the PreToolUse context (item %d) is not between the function_call and its output" % i)
        self.check_once(hits)
        self.check(len(run.requests) == 2, "%d model requests, want 2 (no Stop rescue)" % len(run.requests))
        self.check_block(txt, sent["note_id"], body)
        self.check_receipt(sent["note_id"], "delivered", event="pre_tool_use")

    def test_c_note_after_last_tool_call_rescued_by_stop(self):
        tok = self.token("C")
        body = "%s Late note: also mention the exit code." % tok
        self.start("c: note to the run sent after the last tool call", {"agents": [{"name": "main", "turns": [
            SHELL_TURN,
            {"text": "All done.", "before_reply_cmd": self.note_to_run_argv(body)},
            {"text": "Noted the operator note."}]}]})
        run = self.run_codex()
        sent = self.sent_in_turn(run, 1)
        (n, i, role, txt), hits = self.first_hit(run, tok)
        self.check(len(run.requests) == 3, "%d model requests, want 3 (exactly one extra request "
                                           "from the Stop rescue)" % len(run.requests))
        self.check(n == 2 and role == "user" and txt.startswith("<hook_prompt hook_run_id=\"stop:"),
                   "first seen in request #%d role %s as %r, want request #2, a user <hook_prompt "
                   "hook_run_id=\"stop:...\"> message" % (n, role, kit.shorten(txt, 200)))
        self.check(i == len(run.requests[2].get("input") or []) - 1,
                   "the Stop reason (item %d) is not the last item of request #2" % i)
        self.check_once(hits)
        self.check_block(txt, sent["note_id"], body)
        self.check_receipt(sent["note_id"], "delivered", event="stop")

    def test_d_note_pending_at_end_is_undeliverable_session_ended(self):
        tok_a, tok_b = self.token("D1"), self.token("D2")
        body_a = "%s Late note that Stop rescues." % tok_a
        body_b = "%s Note sent during the rescue turn, too late." % tok_b
        self.start("d: note to the run still pending when the run ends", {"agents": [{"name": "main", "turns": [
            SHELL_TURN,
            {"text": "All done.", "before_reply_cmd": self.note_to_run_argv(body_a)},
            {"text": "Noted.", "before_reply_cmd": self.note_to_run_argv(body_b)}],
            "overflow": {"text": "Nothing more to do."}}]})
        run = self.run_codex()
        note_a = self.sent_in_turn(run, 1)["note_id"]
        note_b = self.sent_in_turn(run, 2)["note_id"]   # fails if there was no rescue turn
        self.check(len(run.requests) == 3, "%d model requests, want 3 (one Stop rescue, then "
                                           "stop_hook_active=true ends the run)" % len(run.requests))
        self.check(not kit.codex_find_marker(run.requests, tok_b),
                   "the note sent during the rescue turn reached the model")
        self.check(kit.codex_find_marker(run.requests, tok_a),
                   "the rescued note (prerequisite) is in no request")
        self.check_receipt(note_a, "delivered", event="stop")
        self.check_receipt(note_b, "undeliverable", reason="session_ended")

    def test_e_permission_request_local_mode_prints_no_decision(self):
        # `codex exec --approve-for-me` + an escalated exec_command is the one exec setup
        # that fires PermissionRequest (contract codex-hooks-observed.md 5). Our hook prints
        # nothing in local mode, so Codex's own flow decides: with no hook decision it asks
        # its automatic reviewer (a "guardian" /v1/responses request; the mock allows).
        # A hook allow would have skipped the guardian; a deny would have blocked the command.
        self.start("e: PermissionRequest in local mode (no decision, Codex's flow decides)", {
            "agents": [{"name": "main", "turns": [
                {"calls": [{"cmd": "touch escalated_file", "sandbox_permissions": "require_escalated",
                            "justification": "need to write"}]},
                {"text": "All done."}], "overflow": {"text": "Nothing more."}}],
            "guardian": {"outcome": "allow", "rationale": "MOCK-GUARDIAN allow (e2e local)"}},
            approve_for_me=True)
        run = self.run_codex("make the file", approve_for_me=True)
        status = [l for l in run.stderr.splitlines() if l.startswith("hook: PermissionRequest")]
        self.extra.append("PermissionRequest status lines: %s" % status)
        self.check("hook: PermissionRequest" in status,
                   "PermissionRequest never fired (no `hook: PermissionRequest` line): is "
                   "--approve-for-me + require_escalated still the trigger?")
        self.check("hook: PermissionRequest Completed" in status and not any(
                   l.endswith(("Blocked", "Failed")) for l in status),
                   "want `hook: PermissionRequest Completed` (no decision, not Blocked or Failed)")
        guardian = [r for r in run.records if r.get("route") == "responses"
                    and r.get("reply", {}).get("kind") == "guardian"]
        self.check(guardian, "Codex never asked its guardian: the hook must have decided (allow)")
        self.check(os.path.exists(os.path.join(self.sb.proj, "escalated_file")),
                   "the escalated command did not run (no escalated_file): denied?")
        self.check(len(run.requests) == 2, "%d model requests, want 2" % len(run.requests))
        hook_log = [l for l in self.sb.preloop_log_lines(200) if " PermissionRequest " in l]
        self.check(hook_log and all("mode=local" in l for l in hook_log),
                   "no `codex PermissionRequest mode=local ...` line in PRELOOP_HOME/log: %s" % hook_log)
        self.extra.append("hook log: %s" % hook_log)
        # Direct evidence as well: the PermissionRequest command hooks.json wires, fed the
        # captured 0.169.0 payload with this run's session id and cwd, prints nothing.
        with open(os.path.join(self.sb.codex_home(), "hooks.json")) as f:
            cmd = json.load(f)["hooks"]["PermissionRequest"][0]["hooks"][0]["command"]
        with open(os.path.join(kit.REPO_ROOT, "fixtures", "codex-0.169.0", "PermissionRequest.json")) as f:
            payload = json.load(f)
        payload.update(session_id=run.session_id, cwd=self.sb.proj)
        p = subprocess.run(cmd, shell=True, input=json.dumps(payload), capture_output=True, text=True,
                           env=self.sb.codex_env(), cwd=self.sb.proj, timeout=30)
        self.extra.append("replayed PermissionRequest (%s): rc=%s stdout=%r stderr=%r"
                          % (cmd, p.returncode, p.stdout, kit.shorten(p.stderr, 300)))
        self.check(p.returncode == 0 and p.stdout == "",
                   "the PermissionRequest hook printed something in local mode (want nothing, exit 0)")


if __name__ == "__main__":
    unittest.main()
