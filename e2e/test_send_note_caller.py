"""End-to-end: Preloop's `send_note` MCP tool gets the caller's session id on the real
Claude Code 2.1.328, Gemini CLI 0.61.0, Copilot CLI 1.0.102 and OpenCode 1.18.33 (issue 33, part 1;
docs/event-matrix.md "send_note caller session").

Gemini (`mcp_preloop_send_note`, named by `mcp_context`) and Copilot (`preloop-send_note`):
the project's hooks installed with `preloop-hooks install --harness H --scope user`
(local mode), the same recording MCP server. BeforeTool prints `tool_input` / preToolUse
prints `modifiedArgs`, no decision:

  Gemini   --approval-mode yolo, --allowed-tools  the tool runs with the caller's id
           default (headless offers no MCP tool) the tool does NOT run
  Copilot  --allow-all, --allow-tool preloop      the tool runs with the caller's id
           default (no permission flag)         the hook ran, the tool does NOT run: the
                                                model is told "Permission denied"

The mock model calls `mcp__preloop__send_note` with a forged `preloop_caller_session_id`;
the tool is served by e2e/mcp_recorder.py, a stdio MCP server that records the arguments
it receives. The project's PreToolUse hook (local mode) prints `updatedInput` with the
caller's session id and no permission decision, so:

  bypass   (--dangerously-skip-permissions)      the tool runs with the caller's id
  allowed  (--allowedTools mcp__preloop__send_note) the tool runs with the caller's id
  default  (no permission flag: headless refuses what it would ask about)
           the tool does NOT run: the rewrite granted nothing

Run from the repository root:
  python3 -m unittest e2e.test_send_note_caller -v
"""

import json
import os
import sys
import unittest
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kit  # noqa: E402

PREREQ = kit.Prereq()
HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = "mcp__preloop__send_note"
FORGED = {"text": "hello child", "runtime_session_id": "rt-1", "preloop_caller_session_id": "FORGED"}


def setUpModule():
    PREREQ.get("claude", kit.ensure_claude)
    PREREQ.get("bin_dir", kit.build_binaries)
    PREREQ.get("gemini", kit.ensure_gemini)
    PREREQ.get("copilot", kit.ensure_copilot)


class TestSendNoteCallerClaudeCode(unittest.TestCase):

    def setUp(self):
        PREREQ.require(self, "claude", "bin_dir")
        self.sb = kit.Sandbox(self.id().rsplit(".", 1)[-1], PREREQ["bin_dir"], claude_bin=PREREQ["claude"])
        self.addCleanup(self.sb.close)
        self.sb.write_settings()
        self.record = os.path.join(self.sb.root, "mcp.jsonl")
        self.mcp_config = os.path.join(self.sb.root, "mcp.json")
        with open(self.mcp_config, "w") as f:
            json.dump({"mcpServers": {"preloop": {
                "type": "stdio", "command": "python3",
                "args": [os.path.join(HERE, "mcp_recorder.py")],
                "env": {"MCP_RECORD": self.record}}}}, f)
        self.sb.start_mock({"turns": [
            {"content": [{"type": "tool_use", "name": TOOL, "input": FORGED}]},
            kit.text_turn("Done.")],
            "overflow": kit.text_turn("Done again.")})

    def run_mode(self, permission_args):
        sid = str(uuid.uuid4())
        argv = [self.sb.claude_bin, "-p", "send the note", "--output-format", "json",
                "--session-id", sid, "--mcp-config", self.mcp_config, "--strict-mcp-config",
                "--debug-file", os.path.join(self.sb.root, "claude.debug.log")] + permission_args
        run = self.sb._run("claude", argv, self.sb.claude_env(), 90)
        calls = kit.read_jsonl(self.record)
        return sid, run, calls

    def explain(self, run):
        return "%s\nstdout: %s\nstderr: %s\nhook log: %s\ndebug: %s" % (
            run.headline(), run.stdout[-1500:], run.stderr[-1500:],
            self.sb.preloop_log_lines(20), self.sb.debug_log_hook_lines(20))

    def check_ran_with_caller(self, permission_args):
        sid, run, calls = self.run_mode(permission_args)
        self.assertEqual(len(calls), 1, "the MCP tool ran once\n" + self.explain(run))
        self.assertEqual(calls[0]["name"], "send_note")
        self.assertEqual(calls[0]["arguments"],
                         dict(FORGED, preloop_caller_session_id=sid),
                         "the forged caller id is replaced by the harness session id, the rest kept")

    def test_bypass_the_tool_gets_the_callers_session_id(self):
        self.check_ran_with_caller(["--dangerously-skip-permissions"])

    def test_allowed_tools_the_tool_gets_the_callers_session_id(self):
        self.check_ran_with_caller(["--allowedTools", TOOL])

    def test_default_mode_the_rewrite_grants_nothing(self):
        sid, run, calls = self.run_mode([])
        self.assertEqual(calls, [], "the harness would have refused: the rewrite must not "
                         "make the tool run\n" + self.explain(run))
        # The hook ran (its log has the PreToolUse) and the harness still refused.
        self.assertTrue(any("PreToolUse" in l or "pre_tool_use" in l or "pre-tool-use" in l
                            for l in self.sb.preloop_log_lines(400)),
                        "the PreToolUse hook ran\n" + self.explain(run))
        results = [t for body in run.requests for t in json.dumps(body).split("tool_result")[1:]]
        self.assertTrue(any("haven't granted" in t for t in results),
                        "the model was told the permission was not granted\n" + self.explain(run))


def recorder_server(record):
    return {"command": "python3", "args": [os.path.join(HERE, "mcp_recorder.py")], "env": {"MCP_RECORD": record}}


class _OtherHarness:
    """The shared half of the Gemini and Copilot cases: a sandbox, our hooks installed
    by `preloop-hooks install`, the recording MCP server, a mock turn calling TOOL."""

    HARNESS = TOOL_NAME = API = None

    def setUp(self):
        PREREQ.require(self, self.HARNESS, "bin_dir")
        self.sb = kit.Sandbox(self.id().rsplit(".", 1)[-1], PREREQ["bin_dir"])
        self.addCleanup(self.sb.close)
        self.record = os.path.join(self.sb.root, "mcp.jsonl")
        self.wire()
        self.sb.install_hooks(self.HARNESS)
        self.sb.start_mock({"turns": [self.call_turn(), {"text": "Done."}],
                            "overflow": {"text": "Done again."}}, api=self.API)

    def calls(self):
        return kit.read_jsonl(self.record)

    def explain(self, run):
        return "%s\nstdout: %s\nstderr: %s\nhook log: %s" % (
            run.headline(), run.stdout[-1500:], run.stderr[-1500:], self.sb.preloop_log_lines(20))

    def check_ran_with_caller(self, permission_args):
        sid = str(uuid.uuid4())
        run = self.run_mode(sid, permission_args)
        calls = self.calls()
        self.assertEqual(len(calls), 1, "the MCP tool ran once\n" + self.explain(run))
        self.assertEqual(calls[0]["name"], "send_note")
        self.assertEqual(calls[0]["arguments"], dict(FORGED, preloop_caller_session_id=sid),
                         "the forged caller id is replaced by the harness session id, the rest kept")

    def hook_ran(self, sid):
        """The hook log has this session's tool hook (`copilot preToolUse`, `gemini BeforeTool`)."""
        return any(sid in line and (" preToolUse " in line or " BeforeTool " in line)
                   for line in self.sb.preloop_log_lines(400))


class TestSendNoteCallerGemini(_OtherHarness, unittest.TestCase):
    HARNESS, TOOL_NAME, API = "gemini", "mcp_preloop_send_note", "gemini"

    def wire(self):
        self.sb.write_gemini_settings(extra={"mcpServers": {"preloop": recorder_server(self.record)}})

    def call_turn(self):
        return {"calls": [{"name": self.TOOL_NAME, "args": FORGED}]}

    def run_mode(self, sid, permission_args):
        argv = [PREREQ["gemini"], "-p", "send the note", "-m", kit.GEMINI_MODEL, "-o", "json",
                "--session-id", sid] + permission_args
        return self.sb._run("gemini", argv, self.sb.gemini_env(), 120)

    def test_yolo_the_tool_gets_the_callers_session_id(self):
        self.check_ran_with_caller(["--approval-mode", "yolo"])

    def test_allowed_tools_the_tool_gets_the_callers_session_id(self):
        self.check_ran_with_caller(["--allowed-tools", self.TOOL_NAME])

    def test_default_mode_the_tool_does_not_run(self):
        run = self.run_mode(str(uuid.uuid4()), [])
        self.assertEqual(self.calls(), [], "Gemini would not run it: neither may the rewrite\n"
                         + self.explain(run))


class TestSendNoteCallerCopilot(_OtherHarness, unittest.TestCase):
    HARNESS, TOOL_NAME, API = "copilot", "preloop-send_note", "copilot"

    def wire(self):
        self.mcp_config = os.path.join(self.sb.root, "mcp.json")
        with open(self.mcp_config, "w") as f:
            json.dump({"mcpServers": {"preloop": dict(recorder_server(self.record), type="local",
                                                      tools=["*"])}}, f)

    def call_turn(self):
        return {"calls": [{"name": self.TOOL_NAME, "arguments": FORGED}]}

    def run_mode(self, sid, permission_args):
        argv = [PREREQ["copilot"], "-p", "send the note", "--no-auto-update", "--no-ask-user",
                "--no-color", "--log-dir", os.path.join(self.sb.root, "copilot-logs"),
                "--additional-mcp-config", "@" + self.mcp_config, "--session-id", sid] + permission_args
        return self.sb._run("copilot", argv, self.sb.copilot_env(), 120)

    def test_allow_all_the_tool_gets_the_callers_session_id(self):
        self.check_ran_with_caller(["--allow-all"])

    def test_allow_tool_the_tool_gets_the_callers_session_id(self):
        self.check_ran_with_caller(["--allow-tool", "preloop"])

    def test_default_mode_the_rewrite_grants_nothing(self):
        sid = str(uuid.uuid4())
        run = self.run_mode(sid, [])
        self.assertEqual(self.calls(), [], "Copilot would have refused: the rewrite must not "
                         "make the tool run\n" + self.explain(run))
        tool_msgs = [m.get("content") for body in run.requests for m in (body.get("messages") or [])
                     if m.get("role") == "tool"]
        self.assertTrue(any("Permission denied" in (c or "") for c in tool_msgs),
                        "the model was told the permission was denied: %s\n%s" % (tool_msgs, self.explain(run)))
        self.assertTrue(self.hook_ran(sid), "our preToolUse hook ran (its log names the session)\n"
                        + self.explain(run))


class TestSendNoteCallerOpenCode(unittest.TestCase):
    """OpenCode 1.18.33 (`preloop_send_note`: `<server>_<tool>`), our plugin installed by
    `preloop-hooks install --harness opencode` (local mode), the recording MCP server as an
    `mcp` entry of opencode.json. tool.execute.before answers `args`; the plugin sets them in
    the object OpenCode hands the MCP server, and OpenCode's own permission check runs after:

      default (MCP tools allowed)                   the tool runs with the caller's id
      permission {"preloop_send_note": "ask"}       the hook ran and rewrote, then `opencode run`
                                                    rejects what it would ask about: the tool
                                                    does NOT run
      permission {"preloop_send_note": "deny"}      the tool is not offered to the model at all"""

    def setUp(self):
        from test_opencode import OpenCodeWorld
        self.record = None

        def script(w):
            self.record = os.path.join(w.root, "mcp.jsonl")
            return {"turns": [{"calls": [{"name": "preloop_send_note", "arguments": FORGED}]},
                              {"text": "Done."}],
                    "overflow": {"text": "Done again."}}
        self.w = OpenCodeWorld(self.id().rsplit(".", 1)[-1], script)
        self.addCleanup(self.w.close)

    def configure(self, permission=None):
        path = os.path.join(self.w.proj, "opencode.json")
        with open(path) as f:
            cfg = json.load(f)
        cfg["mcp"] = {"preloop": {"type": "local", "command": ["python3", os.path.join(HERE, "mcp_recorder.py")],
                                  "environment": {"MCP_RECORD": self.record}}}
        if permission is not None:
            cfg["permission"] = {"preloop_send_note": permission}
        with open(path, "w") as f:
            json.dump(cfg, f)

    def run_oc(self):
        p, _ = self.w.run_opencode("send the note")
        sids = {json.loads(l).get("sessionID") for l in p.stdout.splitlines() if l.startswith("{")} - {None}
        calls = kit.read_jsonl(self.record)
        return p, sids, calls

    def explain(self, p):
        return "rc %s\nstdout: %s\nstderr: %s\nshim log: %s" % (
            p.returncode, p.stdout[-1500:], p.stderr[-2500:], self.w.shim_log())

    def hook_log(self):
        try:
            with open(os.path.join(self.w.home, ".preloop", "log", "hooks.log")) as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def tool_results(self):
        return [texts_of(m) for r in self.w.requests() for m in r["body"]["messages"] if m["role"] == "tool"]

    def test_default_the_tool_gets_the_callers_session_id(self):
        self.configure()
        p, sids, calls = self.run_oc()
        self.assertEqual(p.returncode, 0, self.explain(p))
        self.assertEqual(len(sids), 1, self.explain(p))
        sid = sids.pop()
        self.assertTrue(sid.startswith("ses_"), sid)
        self.assertEqual(len(calls), 1, "the MCP tool ran once\n" + self.explain(p))
        self.assertEqual(calls[0]["name"], "send_note")
        self.assertEqual(calls[0]["arguments"], dict(FORGED, preloop_caller_session_id=sid),
                         "the forged caller id is replaced by the harness session id, the rest kept")
        self.assertTrue(any("NOTE-QUEUED" in t for t in self.tool_results()), self.tool_results())
        self.assertEqual(self.w.shim_log(), "", "the plugin logged a failure")

    def tool_uses(self, p):
        """OpenCode's own record of each tool call (`--format json` tool_use events)."""
        events = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
        return [e["part"] for e in events if e.get("type") == "tool_use"]

    def refused(self, permission):
        self.configure(permission)
        p, sids, calls = self.run_oc()
        self.assertEqual(p.returncode, 0, self.explain(p))
        self.assertEqual(calls, [], "OpenCode would have refused: the rewrite must not make the tool run\n"
                         + self.explain(p))
        return p, sids.pop()

    def test_permission_ask_the_rewrite_grants_nothing(self):
        # `opencode run` rejects whatever would ask. Our hook ran for the call (and rewrote
        # it), then OpenCode's own check refused it: the rewrite answers no permission.
        p, sid = self.refused("ask")
        uses = self.tool_uses(p)
        self.assertEqual([(u["tool"], u["state"]["status"]) for u in uses], [("preloop_send_note", "error")],
                         self.explain(p))
        self.assertIn("rejected permission", uses[0]["state"]["error"])
        before = [l for l in self.hook_log().splitlines() if " tool.execute.before " in l]
        self.assertEqual(len(before), 1, self.hook_log())
        self.assertIn(sid, before[0])
        self.assertEqual(self.w.shim_log(), "", "the plugin logged a failure")

    def test_permission_deny_the_tool_is_never_offered(self):
        # A denied tool is not in the model's tool list at all: the call never reaches a hook
        # as preloop_send_note (OpenCode answers it as the `invalid` tool).
        p, _ = self.refused("deny")
        results = self.tool_results()
        self.assertTrue(results and "unavailable tool 'preloop_send_note'" in results[0], results)


def texts_of(message):
    c = message.get("content")
    if isinstance(c, list):
        return "\n".join(p.get("text", "") for p in c if isinstance(p, dict))
    return c or ""


if __name__ == "__main__":
    unittest.main()
