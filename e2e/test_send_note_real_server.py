"""End-to-end on the real Preloop 0.17.1 server: its MCP `send_note` scope policy with the
caller's session id that our PreToolUse hook supplies (issue 33, part 2;
docs/contracts/preloop-server-mcp.md).

The server is stood up by e2e/preloop_server/up.sh, whose launcher (serve_with_mcp.py)
enters the MCP endpoint's lifespan: without it every POST /mcp/v1 answers 500.

Per test, fresh managed agents with durable agt_ keys (a durable key names no session, so
the server learns the calling run only from `preloop_caller_session_id`):

  conductor  a Claude Code session registered by our real SessionStart hook
  child      a run the conductor started (its SessionStart carries
             PRELOOP_PARENT_SESSION_ID = the conductor's runtime session)
  stranger   an unrelated run of the same human (another agent, no parent)

The conductor's `send_note` arguments are what our real `preloop-claude-code-pre-tool-use`
prints as `updatedInput` for a `mcp__preloop__send_note` call whose model forged the caller
field; they are sent to the server's MCP endpoint as a JSON-RPC `tools/call` with the
conductor's key (the MCP client half of the harness; the harness half is proven per
harness in test_send_note_caller.py). Then:

  a  to its own child (by runtime_session_id, or children="latest"): created, and
     delivered by the child's next hook
  b  to the stranger: pending_approval (the human is asked), nothing is delivered
  c  the model's input without the hook's field: children="latest" is refused,
     note_scope_no_lineage; naming its own child needs the human (pending_approval), as
     0.17.1's seeded rules ask before any note outside self and descendants when the
     human can steer the target (docs/contracts/preloop-server-mcp.md §4)

The same three answers with an OpenCode conductor (TestSendNoteRealServerOpenCode: our
`preloop-opencode-tool-execute-before`'s `args`), and the whole path on the real Gemini CLI and
the real OpenCode calling the server's HTTP MCP endpoint (TestSendNoteRealServerGemini,
TestSendNoteRealServerOpenCodeBinary).

Run from the repository root:
  python3 -m unittest -v e2e.test_send_note_real_server
"""

import json
import os
import subprocess
import sys
import unittest
import urllib.request
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kit  # noqa: E402

PREREQ = kit.Prereq()
TOOL = "mcp__preloop__send_note"


def setUpModule():
    PREREQ.get("bin_dir", kit.build_binaries)
    kit.require_server(PREREQ)


def tearDownModule():
    kit.release_server(PREREQ)


def mcp_call(base_url, token, name, arguments):
    """One JSON-RPC tools/call on the server's streamable-HTTP MCP endpoint (stateless: no
    initialize needed); returns the tool's text result, or raises with the answer."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": name, "arguments": arguments}}).encode()
    req = urllib.request.Request(base_url.rstrip("/") + "/mcp/v1", data=body, method="POST")
    req.add_header("Authorization", "Bearer " + token)
    req.add_header("Content-Type", "application/json")
    req.add_header("Accept", "application/json, text/event-stream")
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(req, timeout=60) as resp:
            raw = resp.read().decode()
    except urllib.error.HTTPError as e:
        raise kit.KitError("POST /mcp/v1 %s -> %s: %s" % (name, e.code, e.read()[:1500]))
    # SSE: the last `data:` line holds the JSON-RPC answer.
    data = [ln[5:].strip() for ln in raw.splitlines() if ln.startswith("data:")]
    msg = json.loads(data[-1] if data else raw)
    if "error" in msg:
        raise kit.KitError("tools/call %s: %s" % (name, msg["error"]))
    return "".join(c.get("text", "") for c in msg["result"].get("content") or [])


class TestSendNoteRealServer(unittest.TestCase):

    def setUp(self):
        PREREQ.require(self, "bin_dir", "creds", "server")
        self.srv = PREREQ["server"]
        self.base_url = PREREQ["creds"]["base_url"]
        # send_note is default-off: every account is seeded with a disabled builtin
        # configuration for it (with the scope rules of docs/contracts/preloop-server-mcp.md
        # §4); the human enables it.
        tool = [t for t in self.srv.must((200,), "GET", "/tools") if t.get("name") == "send_note"]
        self.assertEqual(len(tool), 1, "the server lists send_note once")
        if not tool[0].get("is_enabled"):
            self.assertTrue(tool[0].get("config_id"), tool[0])
            self.srv.must((200,), "PUT", "/tool-configurations/%s" % tool[0]["config_id"], {"is_enabled": True})
        self.sb = kit.Sandbox(self.id().rsplit(".", 1)[-1], PREREQ["bin_dir"])
        self.addCleanup(self.sb.close)
        self.conductor = self.srv.new_agent("e2e conductor %s" % uuid.uuid4().hex[:8])
        self.worker = self.srv.new_agent("e2e worker %s" % uuid.uuid4().hex[:8])
        self.other = self.srv.new_agent("e2e stranger %s" % uuid.uuid4().hex[:8])
        self.c_sid = str(uuid.uuid4())
        self.c_rt = self.start_session("conductor", self.conductor, self.c_sid)
        self.child_sid = str(uuid.uuid4())
        self.child_rt = self.start_session("child", self.worker, self.child_sid,
                                           {"PRELOOP_PARENT_SESSION_ID": self.c_rt})
        self.stranger_sid = str(uuid.uuid4())
        self.stranger_rt = self.start_session("stranger", self.other, self.stranger_sid)

    # -- our hooks, run as Claude Code runs them --------------------------------
    def hook(self, name, agent, payload, env=None, home=None):
        e = self.sb.base_env()
        e.update(PRELOOP_URL=self.base_url, PRELOOP_TOKEN=agent["agent_token"])
        if home:
            e["PRELOOP_HOME"] = home
        e.update(env or {})
        p = subprocess.run([self.sb.bin("preloop-claude-code-" + name)], input=json.dumps(payload),
                           env=e, cwd=self.sb.proj, capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, "%s: %s" % (name, p.stderr))
        return json.loads(p.stdout) if p.stdout.strip() else None

    def registered(self, home, sid, who, hook):
        """The runtime session id the session files under HOME record for SID; a test
        failure naming WHO and the HOOK that should have registered it otherwise."""
        for name in os.listdir(os.path.join(home, "sessions")):
            with open(os.path.join(home, "sessions", name)) as f:
                s = json.load(f)
            if s.get("external_session_id") == sid and s.get("runtime_session_id"):
                return s["runtime_session_id"]
        self.fail("%s: the %s hook registered no runtime session" % (who, hook))

    def start_session(self, who, agent, sid, env=None):
        home = os.path.join(self.sb.root, "ph-" + who)
        os.makedirs(home, mode=0o700, exist_ok=True)
        self.hook("session-start", agent, {"session_id": sid, "hook_event_name": "SessionStart",
                                           "source": "startup", "cwd": self.sb.proj,
                                           "transcript_path": os.path.join(self.sb.root, who + ".jsonl")},
                  env, home)
        return self.registered(home, sid, who, "SessionStart")

    def conductor_input(self, target_rt):
        """What the conductor's tool runs with: our PreToolUse hook's updatedInput for the
        model's call (which forged the caller field)."""
        forged = {"text": "e2e note %s" % uuid.uuid4().hex[:8], "runtime_session_id": target_rt,
                  "preloop_caller_session_id": "FORGED"}
        out = self.hook("pre-tool-use", self.conductor, {
            "session_id": self.c_sid, "hook_event_name": "PreToolUse", "tool_name": TOOL,
            "tool_input": forged, "cwd": self.sb.proj, "permission_mode": "default",
            "transcript_path": os.path.join(self.sb.root, "conductor.jsonl")},
            home=os.path.join(self.sb.root, "ph-conductor"))
        upd = ((out or {}).get("hookSpecificOutput") or {}).get("updatedInput")
        self.assertEqual(upd, dict(forged, preloop_caller_session_id=self.c_sid),
                         "the hook's rewrite: %s" % out)
        self.assertNotIn("permissionDecision", out["hookSpecificOutput"])
        return forged, upd

    def send(self, arguments):
        """The tool's answer: its JSON, or {"text": ...} when it answered prose."""
        text = mcp_call(self.base_url, self.conductor["agent_token"], "send_note", arguments)
        try:
            got = json.loads(text)
        except ValueError:
            got = None
        return got if isinstance(got, dict) else {"text": text}

    # -- the three scope outcomes ---------------------------------------------------
    def child_reads(self, text):
        """The child's next UserPromptSubmit hook carries the note: its additionalContext."""
        out = self.hook("user-prompt-submit", self.worker, {
            "session_id": self.child_sid, "hook_event_name": "UserPromptSubmit", "prompt": "go",
            "cwd": self.sb.proj, "transcript_path": os.path.join(self.sb.root, "child.jsonl")},
            home=os.path.join(self.sb.root, "ph-child"))
        ctx = ((out or {}).get("hookSpecificOutput") or {}).get("additionalContext") or ""
        self.assertIn(text, ctx, "the child's hook carried the note: %s" % out)

    def check_delivered(self, got, text):
        notes = [got["note"]] if got.get("note") else got.get("notes") or []
        self.assertTrue(got.get("ok") and len(notes) == 1 and notes[0].get("note_id"),
                        "one note created, no approval asked: %s" % got)
        self.assertEqual(notes[0].get("runtime_session_id"), self.child_rt, got)
        self.child_reads(text)
        receipt = self.srv.wait_receipt(notes[0]["note_id"], ("delivered",))
        self.assertEqual(receipt.get("state"), "delivered", receipt)

    def test_a_to_its_own_child_is_allowed_and_delivered(self):
        _, upd = self.conductor_input(self.child_rt)
        self.check_delivered(self.send(upd), upd["text"])

    def test_a2_children_latest_reaches_its_own_child(self):
        forged, upd = self.conductor_input(self.child_rt)
        upd = {k: v for k, v in upd.items() if k != "runtime_session_id"}
        self.check_delivered(self.send(dict(upd, children="latest")), upd["text"])

    def test_b_to_an_unrelated_run_of_the_same_human_needs_approval(self):
        _, upd = self.conductor_input(self.stranger_rt)
        got = self.send(upd)
        self.assertIn("pending_approval", json.dumps(got), got)
        self.assertTrue(self.srv.pending_approvals(self.conductor["agent_id"]),
                        "the human has a pending approval for the conductor's note")

    def test_c_without_the_hooks_field_there_is_no_lineage(self):
        # `children` needs the calling session: refused outright.
        forged, _ = self.conductor_input(self.child_rt)
        model_only = {"text": forged["text"], "children": "latest"}
        got = self.send(model_only)
        self.assertIn("note_scope_no_lineage", json.dumps(got), got)
        # Naming its own child: no lineage, so the seeded rules treat it like any
        # other run the human controls and ask the human (never delivered unasked).
        model_only = {k: v for k, v in forged.items() if k != "preloop_caller_session_id"}
        got = self.send(model_only)
        self.assertIn("pending_approval", json.dumps(got), got)

class TestSendNoteRealServerOpenCode(TestSendNoteRealServer):
    """The same three answers with an OpenCode 1.18.33 conductor: its session registered by our
    real `preloop-opencode-session-created` hook, and the `send_note` arguments what our real
    `preloop-opencode-tool-execute-before` answers (`{"kind": "args"}`) for a
    `preloop_send_note` call whose model forged the caller field, run as our plugin runs it
    (one payload line in, one answer line out, `applied`). The child and the stranger are
    other runs of the same human (Claude Code sessions, as above)."""

    OC_SID = None

    def plugin_hook(self, command, agent, payload, home, env=None):
        e = self.sb.base_env()
        e.update(PRELOOP_URL=self.base_url, PRELOOP_TOKEN=agent["agent_token"], PRELOOP_HOME=home)
        e.update(env or {})
        p = subprocess.run([self.sb.bin("preloop-hooks"), "hook", command],
                           input=json.dumps(payload) + "\napplied\n", env=e, cwd=self.sb.proj,
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, "%s: %s" % (command, p.stderr))
        line = p.stdout.split("\n", 1)[0]
        return json.loads(line) if line.strip() else None

    def start_session(self, who, agent, sid, env=None):
        if who != "conductor":
            return super().start_session(who, agent, sid, env)
        home = os.path.join(self.sb.root, "ph-" + who)
        os.makedirs(home, mode=0o700, exist_ok=True)
        self.c_sid = sid = "ses_%s" % uuid.uuid4().hex[:26]
        self.plugin_hook("preloop-opencode-session-created", agent,
                         {"v": 1, "event": "session.created", "session_id": sid, "cwd": self.sb.proj,
                          "mode": "serve"}, home, env)
        return self.registered(home, sid, who, "session.created")

    def conductor_input(self, target_rt):
        forged = {"text": "e2e note %s" % uuid.uuid4().hex[:8], "runtime_session_id": target_rt,
                  "preloop_caller_session_id": "FORGED"}
        out = self.plugin_hook("preloop-opencode-tool-execute-before", self.conductor, {
            "v": 1, "event": "tool.execute.before", "session_id": self.c_sid, "cwd": self.sb.proj,
            "mode": "serve", "tool_name": "preloop_send_note", "call_id": "call_1",
            "tool_input": forged, "mcp_servers": ["preloop"]}, os.path.join(self.sb.root, "ph-conductor"))
        self.assertEqual(out, {"kind": "args", "args": dict(forged, preloop_caller_session_id=self.c_sid)},
                         "the hook's rewrite, no decision")
        return forged, out["args"]


class TestSendNoteRealServerGemini(unittest.TestCase):
    """The whole path on real binaries: the real Gemini CLI 0.61.0 (mock model) calls the real
    server's `send_note` over HTTP MCP (`mcp_preloop_send_note`, the conductor's agt_ key in
    the server's headers), targeting its own run by `external_session_id`. With our hooks
    (server mode) the call carries the caller's session: the target is the caller itself
    (`self`), the note is written. Without them the server sees no lineage and asks the
    human (`pending_approval`). The server's answer is read where the model reads it: the
    tool's functionResponse in the next model request. (Without them the run is registered
    by our SessionStart hook alone, so the target exists.)"""

    def setUp(self):
        PREREQ.require(self, "bin_dir", "creds", "server")
        self.gemini = PREREQ.get("gemini", kit.ensure_gemini)
        PREREQ.require(self, "gemini")
        self.srv = PREREQ["server"]
        self.base_url = PREREQ["creds"]["base_url"]
        tool = [t for t in self.srv.must((200,), "GET", "/tools") if t.get("name") == "send_note"][0]
        if not tool.get("is_enabled"):
            self.srv.must((200,), "PUT", "/tool-configurations/%s" % tool["config_id"], {"is_enabled": True})
        self.agent = self.srv.new_agent("e2e gemini conductor %s" % uuid.uuid4().hex[:8], kind="gemini_cli")

    def run_gemini(self, with_hooks):
        sb = kit.Sandbox(self.id().rsplit(".", 1)[-1], PREREQ["bin_dir"])
        self.addCleanup(sb.close)
        sid = str(uuid.uuid4())
        sb.hook_env = {"PRELOOP_URL": self.base_url, "PRELOOP_TOKEN": self.agent["agent_token"]}
        sb.write_gemini_settings(extra={"mcpServers": {"preloop": {
            "httpUrl": self.base_url + "/mcp/v1",
            "headers": {"Authorization": "Bearer " + self.agent["agent_token"]}}}})
        if with_hooks:
            sb.install_hooks("gemini")
        else:
            # The run is registered (as our SessionStart hook does it) but no tool hook
            # touches the call: the target exists, the caller is unknown.
            env = dict(sb.base_env(), **sb.hook_env)
            p = subprocess.run([sb.bin("preloop-gemini-session-start")], input=json.dumps({
                "session_id": sid, "hook_event_name": "SessionStart", "source": "startup", "cwd": sb.proj,
                "transcript_path": os.path.join(sb.root, "t.jsonl")}), env=env, cwd=sb.proj,
                capture_output=True, text=True, timeout=60)
            self.assertEqual(p.returncode, 0, p.stderr)
        text = "e2e self note %s" % uuid.uuid4().hex[:8]
        sb.start_mock({"turns": [{"calls": [{"name": "mcp_preloop_send_note", "args": {
            "text": text, "external_session_id": sid, "preloop_caller_session_id": "FORGED"}}]},
            {"text": "Done."}], "overflow": {"text": "Done again."}}, api="gemini")
        argv = [self.gemini, "-p", "note yourself", "-m", kit.GEMINI_MODEL, "-o", "json",
                "--approval-mode", "yolo", "--session-id", sid]
        run = sb._run("gemini", argv, sb.gemini_env(), 180)
        answers = [fr for body in run.requests for c in body.get("contents") or [] for part in c.get("parts") or []
                   for fr in [part.get("functionResponse")] if fr and fr.get("name") == "mcp_preloop_send_note"]
        self.assertTrue(answers, "the tool answered the model\n%s\nstderr: %s\nhook log: %s" % (
            run.headline(), run.stderr[-2000:], sb.preloop_log_lines(20)))
        output = (answers[0].get("response") or {}).get("output") or ""
        # Gemini wraps an MCP tool's text in <untrusted_context>…</untrusted_context>.
        inner = output.split("<untrusted_context>", 1)[-1].rsplit("</untrusted_context>", 1)[0].strip()
        try:
            return text, json.loads(inner)
        except ValueError:
            return text, {"text": output}

    def test_with_our_hooks_the_note_to_itself_is_written(self):
        text, answer = self.run_gemini(with_hooks=True)
        self.assertTrue(answer.get("ok"), answer)
        self.assertEqual((answer.get("note") or {}).get("text"), text, answer)

    def test_without_our_hooks_the_server_asks_the_human(self):
        _, answer = self.run_gemini(with_hooks=False)
        self.assertEqual(answer.get("status"), "pending_approval", answer)

class TestSendNoteRealServerOpenCodeBinary(unittest.TestCase):
    """The whole path on real binaries: the real OpenCode 1.18.33 (mock model) with our plugin in
    server mode calls the real server's `send_note` over HTTP MCP (`preloop_send_note`, a
    `remote` entry with the agent's agt_ key in its headers). The conductor's `task` tool first
    runs a sub-agent, whose child session our hooks register as the conductor's child (issue 32);
    then the conductor sends `children: "latest"` with a forged caller field. With our plugin the
    server sees the caller (the rewrite) and its child: the note is written. Without our plugin
    (the runs registered by our hooks, as below, but no tool hook) the server knows no caller:
    `note_scope_no_lineage`. The answer is read where the model reads it: the tool's result."""

    def setUp(self):
        PREREQ.require(self, "bin_dir", "creds", "server")
        self.srv = PREREQ["server"]
        self.base_url = PREREQ["creds"]["base_url"]
        tool = [t for t in self.srv.must((200,), "GET", "/tools") if t.get("name") == "send_note"][0]
        if not tool.get("is_enabled"):
            self.srv.must((200,), "PUT", "/tool-configurations/%s" % tool["config_id"], {"is_enabled": True})
        self.agent = self.srv.new_agent("e2e opencode conductor %s" % uuid.uuid4().hex[:8], kind="opencode")

    def run_opencode(self, with_plugin):
        from test_opencode import OpenCodeWorld, texts
        text = "e2e child note %s" % uuid.uuid4().hex[:8]
        script = {"turns": [{"calls": [{"name": "task", "arguments": {
                                "description": "sub work", "prompt": "SUBAGENT-TASK say hi",
                                "subagent_type": "general"}}]},
                            {"calls": [{"name": "preloop_send_note", "arguments": {
                                "text": text, "children": "latest", "preloop_caller_session_id": "FORGED"}}]},
                            {"text": "Done."}],
                  "overflow": {"text": "Done again."},
                  "agents": [{"name": "sub", "match": "SUBAGENT-TASK", "turns": [{"text": "Sub done."}],
                              "overflow": {"text": "Sub again."}}]}
        w = OpenCodeWorld(self.id().rsplit(".", 1)[-1], script,
                          {"PRELOOP_URL": self.base_url, "PRELOOP_TOKEN": self.agent["agent_token"]})
        self.addCleanup(w.close)
        path = os.path.join(w.proj, "opencode.json")
        with open(path) as f:
            cfg = json.load(f)
        cfg["mcp"] = {"preloop": {"type": "remote", "url": self.base_url.rstrip("/") + "/mcp/v1",
                                  "headers": {"Authorization": "Bearer " + self.agent["agent_token"]},
                                  "oauth": False}}
        with open(path, "w") as f:
            json.dump(cfg, f)
        if not with_plugin:
            # The hooks register every session (the sub-agent as the child too), but no tool
            # hook touches the call: the plugin keeps only its event handler.
            manifest = os.path.join(w.config, "plugins", "preloop.json")
            with open(manifest) as f:
                m = json.load(f)
            m["hooks"].pop("tool.execute.before")
            with open(manifest, "w") as f:
                json.dump(m, f)
        p, _ = w.run_opencode("Delegate, then steer the worker")
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        results = [texts(m) for r in w.requests() if r["reply"].get("agent") != "sub"
                   for m in r["body"]["messages"] if m["role"] == "tool"]
        answers = [t for t in results if "ok" in t or "note_scope" in t or "pending" in t]
        self.assertTrue(answers, "the tool answered the model: %s\n%s\nshim: %s" % (
            results, p.stderr[-2000:], w.shim_log()))
        try:
            return text, json.loads(answers[-1])
        except ValueError:
            return text, {"text": answers[-1]}

    def test_with_our_plugin_the_note_to_its_sub_agent_is_written(self):
        text, answer = self.run_opencode(with_plugin=True)
        self.assertTrue(answer.get("ok"), answer)
        notes = [answer["note"]] if answer.get("note") else answer.get("notes") or []
        self.assertEqual([n.get("text") for n in notes], [text], answer)

    def test_without_the_tool_hook_there_is_no_lineage(self):
        _, answer = self.run_opencode(with_plugin=False)
        self.assertIn("note_scope_no_lineage", json.dumps(answer), answer)


if __name__ == "__main__":
    unittest.main()
