"""Self-test of the e2e kit, independent of the project's binaries: the real Claude Code
CLI with e2e/fake_hook.py as every hook, proving the mock, the settings file, the
--session-id plumbing, before_reply_cmd and the marker search in both wire shapes.
If this fails, test_claude_code.py results mean nothing (the rig is broken, or
Claude Code changed where hook text lands). Gemini CLI and Copilot CLI:
test_kit_plumbing_gemini_copilot.py.
"""

import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kit  # noqa: E402

PREREQ = kit.Prereq()
EVENTS = ["SessionStart", "UserPromptSubmit", "PreToolUse", "Stop", "SessionEnd"]


def setUpModule():
    PREREQ.get("claude", kit.ensure_claude)


class TestKitPlumbing(unittest.TestCase):

    def setUp(self):
        PREREQ.require(self, "claude")

    def run_fake(self, model, stop_mode):
        sb = kit.Sandbox("plumbing-%s" % stop_mode, "/nonexistent", claude_bin=PREREQ["claude"])
        self.addCleanup(sb.close)
        hook_log = os.path.join(sb.root, "fake-hook.jsonl")
        sb.write_settings({ev: kit.fake_hook_command(hook_log, ev, "claude", "--stop-mode", stop_mode)
                           for ev in EVENTS})
        side_file = os.path.join(sb.root, "side-effect.txt")
        sb.start_mock({"turns": [
            {"content": [{"type": "tool_use", "name": "Bash",
                          "input": {"command": "echo hi", "description": "say hi"}}],
             "before_reply_cmd": [sys.executable, "-c",
                                  "import os,sys; open(sys.argv[1],'w').write(os.environ['PRELOOP_HOME']);"
                                  "print('{\"ok\": true}')", side_file]},
            {"content": [{"type": "text", "text": "done"}]},
            {"content": [{"type": "text", "text": "done after stop"}]}]})
        sid = kit.new_session_id()
        run = sb.run_claude("Run echo hi", sid, model=model)
        sb.mock.stop()
        ctx = "artifacts: %s\nstdout: %s\nstderr: %s\n%s" % (
            sb.root, kit.shorten(run.stdout), kit.shorten(run.stderr),
            kit.summarize_requests(run.requests, ["FAKE-MARKER-"]))
        sb.keep = True   # until the asserts pass
        self.assertEqual(run.rc, 0, ctx)
        self.assertEqual(len(run.requests), 3, ctx)
        with open(side_file) as f:
            self.assertEqual(f.read(), sb.preloop_home, "before_reply_cmd env")
        br = run.before_reply()
        self.assertEqual(len(br), 1, ctx)
        self.assertEqual((br[0]["rc"], json.loads(br[0]["stdout"])), (0, {"ok": True}))
        with open(hook_log) as f:
            events = [json.loads(l) for l in f]
        self.assertTrue(all(e["stdin"].get("session_id") == sid for e in events),
                        "--session-id is the hooks' session_id")
        self.assertEqual({e["event"] for e in events}, set(EVENTS))

        def where(ev):
            return [(h.request_index, h.shape, h.label)
                    for h in kit.find_marker(run.requests, "FAKE-MARKER-%s session=%s" % (ev, sid))]
        ss, pre, stop = where("SessionStart"), where("PreToolUse"), where("Stop")
        sb.keep = False
        return ss, pre, stop, ctx

    def test_default_model_system_messages_stop_context(self):
        ss, pre, stop, ctx = self.run_fake(kit.MODEL_DEFAULT, "context")
        self.assertEqual(ss[0], (0, "system_message", kit.LABEL_SESSION_START), ctx)
        self.assertEqual(pre[0], (1, "system_message", kit.LABEL_PRE_TOOL_USE_BASH), ctx)
        self.assertEqual(stop, [(2, "system_reminder", kit.LABEL_STOP_CONTEXT)], ctx)

    def test_sonnet_system_reminders_stop_block(self):
        ss, pre, stop, ctx = self.run_fake(kit.MODEL_SONNET_45, "block")
        self.assertEqual(ss[0], (0, "system_reminder", kit.LABEL_SESSION_START), ctx)
        self.assertEqual(pre[0], (1, "system_reminder", kit.LABEL_PRE_TOOL_USE_BASH), ctx)
        labels = sorted(l for _, _, l in stop)
        self.assertEqual([r for r, _, _ in stop], [2, 2], ctx)
        self.assertEqual(labels[1], kit.LABEL_STOP_FEEDBACK, ctx)
        self.assertTrue(labels[0].startswith(kit.LABEL_STOP_BLOCKING_PREFIX), ctx)


if __name__ == "__main__":
    unittest.main()
