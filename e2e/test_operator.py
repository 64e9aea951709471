"""Find, watch, steer, end to end with the real Claude Code 2.1.328 (`claude -p` against
mock_anthropic.py) and the operator CLI:

  conductor  a conductor run whose Bash tool starts two `claude -p` workers (their own mock
             model; lineage through PRELOOP_PARENT_SESSION_ID, which our SessionStart hook
             exports into the conductor's Bash), waits until both sit in a tool call, then runs
             `preloop-hooks notes send --children all "..."` from its Bash tool. Both workers'
             next model request after their next tool call carries the note (PreToolUse:Bash
             label, not before), and both receipts end `delivered`. In local mode
             (TestOperatorLocal) and against the real Preloop 0.17.1 server
             (TestOperatorServer: the conductor's CLI finds the user token that
             `preloop-hooks login --user` stored, the hooks use the agent's runtime token).

  attach     (real server only) `preloop-hooks sessions attach <session> --json` runs beside a
             real `claude -p`: it shows the Bash tool call with its arguments while the run is
             going, a note typed into it (its stdin) reaches the model's next request after the
             next tool call, and attach shows that note's receipt turn `delivered`; it exits 0 when
             the run ends.

Missing prerequisites fail the tests (kit.Prereq), never skip them. Run alone:
  python3 -m unittest -v e2e/test_operator.py
"""

import json
import os
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kit  # noqa: E402

PREREQ = kit.Prereq()


def setUpModule():
    PREREQ.get("claude", kit.ensure_claude)
    PREREQ.get("bin_dir", kit.build_binaries)
    kit.require_server(PREREQ)


def tearDownModule():
    kit.release_server(PREREQ)


def wait_file_cmd(path, timeout_s=90):
    """A shell loop that waits until `path` exists."""
    return "for i in $(seq 1 %d); do [ -e %s ] && break; sleep 0.1; done" % (
        int(timeout_s * 10), kit.quote_path(path))


def claude_argv(sb, prompt, session_id, debug_name="claude.debug.log"):
    return [sb.claude_bin, "-p", prompt, "--output-format", "json", "--dangerously-skip-permissions",
            "--session-id", session_id, "--debug-file", os.path.join(sb.root, debug_name)]


def requests_of(records, prompt):
    """The main-conversation request bodies of the worker started with `prompt`."""
    out = []
    for r in records:
        if r.get("route") != "messages" or (r.get("reply") or {}).get("kind") != "main":
            continue
        body = r.get("body") or {}
        first = next((m for m in body.get("messages") or [] if m.get("role") == "user"), None)
        content = (first or {}).get("content")
        text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
        if prompt in text:
            out.append(body)
    return out


class _Operator(kit.Scenario):
    HARNESS = "claude"
    PREREQ = PREREQ
    PREREQS = ("claude", "bin_dir")
    TOKEN_PREFIX = "E2E-OP"
    ARTIFACTS = "requests.jsonl, worker-mock/requests.jsonl, worker-*.out, conductor-send.out, home/, preloop-home/"

    def label(self):
        return self.MODE

    def start(self, scenario):
        sb = self.new_sandbox(scenario)
        sb.write_settings()
        self.wiring = "kit.Sandbox.write_settings"
        if self.MODE != "local":
            # The operator's user token, stored the way a person does it; the hooks keep
            # using the agent's runtime token from the environment.
            p = subprocess.run(sb.cli_argv("login", "--user", "--url", PREREQ["creds"]["base_url"]),
                               input=PREREQ["creds"]["user_token"], env=sb.base_env(), cwd=sb.root,
                               capture_output=True, text=True, timeout=60)
            self.check(p.returncode == 0, "`preloop-hooks login --user` failed: %s%s" % (p.stdout, p.stderr))
        return sb

    def cli_env(self, sb):
        env = sb.base_env()
        env.update(sb.hook_env)
        return env

    # ------------------------------------------------------------------ conductor
    def test_conductor_notes_every_child_it_started(self):
        sb = self.start("conductor: notes send --children all from a conductor's Bash tool")
        tok = self.token("KIDS")
        body = "%s Wrap up now and report." % tok
        workers = {"A": kit.new_session_id(), "B": kit.new_session_id()}
        flag = os.path.join(sb.root, "note-sent.flag")
        ready = os.path.join(sb.root, "ready")
        os.makedirs(ready, exist_ok=True)
        # The workers' model: wait in a tool call until the note was sent, then one more
        # tool call (its PreToolUse carries the note), then finish.
        wmock = self.worker_mock(sb, "touch %s/$$; %s; echo go" % (kit.quote_path(ready), wait_file_cmd(flag)))
        spawn = " ".join(
            "ANTHROPIC_BASE_URL=%s nohup %s >%s 2>&1 &" % (
                wmock.url, " ".join(kit.quote_path(a) for a in claude_argv(
                    sb, "worker %s: fix the flaky test" % name, sid, "worker-%s.debug.log" % name)),
                kit.quote_path(os.path.join(sb.root, "worker-%s.out" % name)))
            for name, sid in workers.items())
        wait_ready = ("for i in $(seq 1 600); do [ $(ls %s | wc -l) -ge 2 ] && break; sleep 0.1; done"
                      % kit.quote_path(ready))
        send_out = os.path.join(sb.root, "conductor-send.out")
        conductor_script = {"turns": [
            kit.bash_turn("%s %s; echo spawned" % (spawn, wait_ready), "Starting two workers."),
            kit.bash_turn("%s notes send --children all --json %s >%s 2>&1; echo rc=$? >>%s; touch %s" % (
                kit.quote_path(sb.bin(kit.CLI_BINARY)), kit.quote_path(body), kit.quote_path(send_out),
                kit.quote_path(send_out), kit.quote_path(flag)), "Telling them to wrap up."),
            kit.text_turn("Both workers were told."),
        ]}
        sb.start_mock(conductor_script)
        self.sid = kit.new_session_id()
        try:
            self.run_result = sb.run_claude("Start two workers, then tell them to wrap up.", self.sid,
                                            timeout=float(os.environ.get("PRELOOP_E2E_CLAUDE_TIMEOUT", "60")) * 3)
        finally:
            sb.mock.stop()
        run = self.run_result
        self.check(not run.timed_out and run.rc == 0, "the conductor did not finish cleanly (rc=%s)" % run.rc)
        # The workers finish on their own once the flag is there (claude -p --output-format
        # json prints its result when it exits).
        outs = [os.path.join(sb.root, "worker-%s.out" % n) for n in workers]
        deadline = time.time() + 120
        while time.time() < deadline:
            if all('"result"' in kit.read_text(o) for o in outs):
                break
            time.sleep(0.5)
        for o in outs:
            self.extra.append("%s: %s" % (os.path.basename(o), kit.shorten(kit.read_text(o) or "(none)", 600)))
        time.sleep(2.0)   # their SessionEnd hooks
        try:
            with open(send_out) as f:
                sent_text = f.read()
        except OSError:
            sent_text = "(no output file)"
        notes = self.check_children_sent(sent_text, workers.values(), shell="Bash")
        records = wmock.records()
        for name, sid in workers.items():
            reqs = requests_of(records, "worker %s" % name)
            hits = kit.find_marker(reqs, tok)
            first = kit.first_hit(hits)
            self.check(first is not None, "worker %s never got the note (%d requests): %s"
                       % (name, len(reqs), kit.summarize_requests(reqs, [tok])))
            self.check(first.request_index == 2 and first.label == kit.LABEL_PRE_TOOL_USE_BASH,
                       "worker %s got the note in request #%d under %r, want #2 under the "
                       "PreToolUse:Bash label (its next request after its next tool call)"
                       % (name, first.request_index, first.label))
        for n in notes:
            r = self.wait_receipt(n["note_id"], kit.TERMINAL_STATES)
            self.check(r.get("state") == "delivered", "receipt of %s: %r" % (n["note_id"], r))
            self.check(r.get("delivery_event") == "pre_tool_use", "delivery_event %r" % r.get("delivery_event"))


class TestOperatorLocal(_Operator, kit.LocalMode, unittest.TestCase):
    pass


class TestOperatorServer(_Operator, kit.ServerMode, unittest.TestCase):
    PREREQS = ("creds", "claude", "bin_dir")

    def test_attach_watches_a_run_and_steers_it(self):
        sb = self.start("attach: watch a real claude -p and steer it from attach")
        tok = self.token("ATTACH")
        body = "%s From attach: use the staging database." % tok
        flag = os.path.join(sb.root, "typed.flag")
        # The mock touches `asked` when request #1 arrives: step one's PreToolUse has run by
        # then, so a note typed after it can only ride step two's PreToolUse (request #2).
        asked = os.path.join(sb.root, "asked.flag")
        self.sid = kit.new_session_id()
        script = {"turns": [
            kit.bash_turn("echo step-one", "Step one."),
            dict(kit.bash_turn("echo step-two", "Step two."),
                 before_reply_cmd=["sh", "-c", "touch %s; %s" % (kit.quote_path(asked), wait_file_cmd(flag, 60))],
                 before_reply_timeout_s=70),
            kit.text_turn("Done."),
        ]}
        sb.start_mock(script)
        state = {"lines": [], "typed_at": None, "tool_seen_at": None, "note_sent": None}
        env = self.cli_env(sb)
        env.pop("PRELOOP_TOKEN", None)     # the operator's side: URL + user token only

        def during(_proc):
            session_file = os.path.join(sb.preloop_home, "sessions", self.sid + ".json")
            deadline = time.time() + 60
            while not os.path.exists(session_file) and time.time() < deadline:
                time.sleep(0.1)
            att = subprocess.Popen(sb.cli_argv("sessions", "attach", self.sid, "--json"), env=env, cwd=sb.root,
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True)
            state["proc"] = att

            def reader():
                for line in att.stdout:
                    state["lines"].append((time.time(), line.rstrip("\n")))
            th = threading.Thread(target=reader, daemon=True)
            th.start()
            state["reader"] = th
            deadline = time.time() + 60
            while time.time() < deadline:
                evs = [json.loads(l) for _, l in state["lines"] if l.startswith("{")]
                if any(e.get("kind") == "tool_call" and "step-one" in (e.get("args") or "") for e in evs):
                    state["tool_seen_at"] = time.time()
                    break
                time.sleep(0.1)
            while not os.path.exists(asked) and time.time() < deadline:
                time.sleep(0.05)
            att.stdin.write(body + "\n")
            att.stdin.flush()
            state["typed_at"] = time.time()
            deadline = time.time() + 30
            while time.time() < deadline:
                evs = [json.loads(l) for _, l in state["lines"] if l.startswith("{")]
                mine = [e for e in evs if e.get("kind") == "note_sent" and tok in (e.get("text") or "")]
                if mine:
                    state["note_sent"] = mine[0]
                    break
                time.sleep(0.1)
            open(flag, "w").close()
            return "typed"

        try:
            self.run_result = sb._run("claude", claude_argv(sb, "Run two steps.", self.sid), sb.claude_env(),
                                      float(os.environ.get("PRELOOP_E2E_CLAUDE_TIMEOUT", "60")) * 2,
                                      during=during)
        finally:
            sb.mock.stop()
        run = self.run_result
        att = state.get("proc")
        rc = None
        if att:
            try:
                rc = att.wait(30)
            except subprocess.TimeoutExpired:
                att.kill()
            att.stdin.close()
            state["reader"].join(5)
            self.extra.append("attach stderr: " + kit.shorten(att.stderr.read(), 1500))
        self.extra.append("attach output:\n  " + "\n  ".join(l for _, l in state["lines"][-60:]))
        self.check(not run.timed_out and run.rc == 0, "claude -p did not finish cleanly (rc=%s)" % run.rc)
        self.check(att is not None, "attach never started (the session file never appeared)")
        events = [json.loads(l) for _, l in state["lines"] if l.startswith("{")]
        self.check(state["tool_seen_at"] is not None,
                   "attach never showed the Bash call `echo step-one-…` while the run was going")
        self.check(any(e.get("kind") == "attached" and e.get("source") == "socket" for e in events),
                   "no `attached` message from the server's attach socket")
        sent = state["note_sent"]
        self.check(sent and sent.get("note_id"), "the typed note was never sent by attach")
        self.add_sent({"note_id": sent["note_id"]}, "sessions attach")
        first = kit.first_hit(kit.find_marker(run.requests, tok))
        self.check(first is not None, "the note typed into attach never reached the model")
        self.check(first.request_index == 2 and first.label == kit.LABEL_PRE_TOOL_USE_BASH,
                   "the note is first in request #%d under %r, want #2 under PreToolUse:Bash"
                   % (first.request_index, first.label))
        self.check_block(first.text, sent["note_id"], body)
        self.check(any(e.get("kind") == "note_state" and e.get("note_id") == sent["note_id"]
                       and e.get("state") == "delivered" for e in events),
                   "attach never showed the receipt of %s turn delivered" % sent["note_id"])
        self.check(any(e.get("kind") == "session_ended" for e in events), "attach never showed the end")
        self.check(rc == 0, "attach exited %r, want 0 after the session ended" % rc)
        self.check_receipt(sent["note_id"], "delivered", event="pre_tool_use")


if __name__ == "__main__":
    unittest.main()
