"""End-to-end: Preloop's `send_note` MCP tool gets the caller's session id on the real
Claude Code 2.1.328, Gemini CLI 0.61.0 and Copilot CLI 1.0.102 (issue 33, part 1;
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
        self.sb = kit.Sandbox(self.id().rsplit(".", 1)[-1], PREREQ["bin_dir"], PREREQ["claude"])
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
        calls = []
        if os.path.exists(self.record):
            with open(self.record) as f:
                calls = [json.loads(line) for line in f if line.strip()]
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
        if not os.path.exists(self.record):
            return []
        with open(self.record) as f:
            return [json.loads(line) for line in f if line.strip()]

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


if __name__ == "__main__":
    unittest.main()
