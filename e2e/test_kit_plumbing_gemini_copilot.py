"""Self-test of the e2e kit for Gemini CLI 0.61.0 and GitHub Copilot CLI 1.0.102, independent
of the project's binaries: the real CLIs, headless, against mock_gemini.py / mock_copilot.py,
with e2e/fake_hook.py as every hook (wired by Sandbox.write_gemini_hooks /
write_copilot_hooks). It proves the mocks, the hook config files, before_reply_cmd and the
marker search, and it is the evidence the Rust hooks for these harnesses are built against:
every carrier is checked to the exact text the model receives, with `<`, `>`, `&` and quotes
in the hook's text (e2e/README.md, "Gemini CLI" and "Copilot CLI", sums the results up).

Gemini:  SessionStart / BeforeAgent / AfterTool hookSpecificOutput.additionalContext land
         (wrapped in <hook_context>, `<` `>` escaped); AfterAgent decision:block + reason
         continues the turn exactly once, reason verbatim; BeforeTool decision:deny + reason
         blocks the tool; which environment variables reach a hook under GITHUB_SHA /
         SURFACE=Github (strict sanitisation) and how to let PRELOOP_* through.
Copilot: camelCase config ({"version":1,"hooks":{"sessionStart":[{"type":"command",
         "bash":...,"timeoutSec":N}]}}): sessionStart / userPromptSubmitted / preToolUse /
         postToolUse top-level additionalContext land verbatim; preToolUse
         permissionDecision:deny blocks; agentStop decision:block continues once; the
         PascalCase config carries the same outputs (snake_case stdin); a sub-agent's hooks:
         ids, agent fields, and that their context reaches only the sub-agent.

If this fails, results of suites built on these harnesses mean nothing (the rig is broken,
or the harness changed where hook text lands).
"""

import os
import re
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kit  # noqa: E402

PREREQ = kit.Prereq()
EXTRA = '<b>x</b> & "q"'                  # special characters in every hook's text
PROMPT = "Run echo hi"


def setUpModule():
    PREREQ.get("gemini", kit.ensure_gemini)
    PREREQ.get("copilot", kit.ensure_copilot)


def lt_gt_escaped(s):
    return s.replace("<", "&lt;").replace(">", "&gt;")


class _Plumbing(unittest.TestCase):
    HARNESS = None

    def setUp(self):
        PREREQ.require(self, self.HARNESS)
        self.sb = kit.Sandbox("plumbing-%s-%s" % (self.HARNESS, self._testMethodName[5:30]), "/nonexistent")
        self.addCleanup(self.sb.close)
        self.sb.keep = True          # until the test passes
        self.hook_log = os.path.join(self.sb.root, "fake-hook.jsonl")
        self.run_result = None

    def passed(self):
        self.sb.keep = os.environ.get("PRELOOP_E2E_KEEP") == "1"

    def calls(self, event=None):
        return [c for c in kit.read_jsonl(self.hook_log) if event is None or c["event"] == event]

    def ctx(self, requests=None):
        run = self.run_result
        if not run:
            return "artifacts: %s" % self.sb.root
        return "\nartifacts: %s\n%s\nstdout: %s\nstderr: %s\nhook calls: %s\n%s" % (
            self.sb.root, run.headline(), kit.shorten(run.stdout, 800), kit.shorten(run.stderr, 800),
            [(c["event"], c["printed"] is not None) for c in self.calls()],
            kit.SUMMARIZERS[run.harness](requests if requests is not None else run.requests,
                                         ["FAKE-"]))

    def side_effect_turn(self, turn):
        """turn + a before_reply_cmd that writes the mock's PRELOOP_HOME to a file and
        prints {"ok": true} (proves the command ran, before the answer, in the mock's env)."""
        self.side_file = os.path.join(self.sb.root, "side-effect.txt")
        return dict(turn, before_reply_cmd=[
            sys.executable, "-c", "import os,sys; open(sys.argv[1],'w').write(os.environ['PRELOOP_HOME']);"
            "print('{\"ok\": true}')", self.side_file])

    def check_side_effect(self, run):
        br = run.before_reply()
        self.assertEqual([(b.get("rc"), b.get("stdout", "").strip()) for b in br], [(0, '{"ok": true}')],
                         self.ctx())
        with open(self.side_file) as f:
            self.assertEqual(f.read(), self.sb.preloop_home, "before_reply_cmd runs in the mock's env")

    def marker(self, event, sid, agent=None, deny=False):
        return "FAKE-%s-%s session=%s%s %s" % ("DENY" if deny else "MARKER", event, sid,
                                              " agent=%s" % agent if agent else "", EXTRA)


# =============================================================================== Gemini

class TestGeminiPlumbing(_Plumbing):
    HARNESS = "gemini"
    EVENTS = ("SessionStart", "BeforeAgent", "BeforeTool", "AfterTool", "AfterAgent", "SessionEnd")

    def run_gemini(self, turns, deny=False, **kw):
        flags = ["--extra", EXTRA] + (["--deny"] if deny else [])
        self.sb.write_gemini_hooks({ev: kit.fake_hook_command(self.hook_log, ev, "gemini", *flags)
                                    for ev in self.EVENTS})
        self.sb.start_mock({"turns": turns, "overflow": {"text": "Overflow."}}, "gemini")
        self.sid = kit.new_session_id()
        self.run_result = run = self.sb.run_gemini(PREREQ["gemini"], PROMPT, session_id=self.sid, **kw)
        self.sb.mock.stop()
        self.assertEqual((run.rc, run.timed_out), (0, False), self.ctx())
        self.assertEqual((run.output or {}).get("session_id"), self.sid, self.ctx())
        self.assertTrue(all(c["stdin"].get("session_id") == self.sid for c in self.calls()),
                        "--session-id is the hooks' session_id" + self.ctx())
        return run

    def landing(self, run, marker, request_index, kind):
        hits = kit.gemini_find_marker(run.requests, marker)
        first = kit.first_landing(hits)
        self.assertIsNotNone(first, "%r reached no request%s" % (marker, self.ctx()))
        self.assertEqual((first.request_index, first.kind), (request_index, kind),
                         "%s%s" % (first.short(), self.ctx()))
        self.assertEqual(len({(h.index, h.path) for h in hits}), 1, "in more than one place: %s"
                         % [h.short(80) for h in hits])
        return first

    def test_context_carriers_and_after_agent_continuation(self):
        run = self.run_gemini([
            self.side_effect_turn({"calls": [{"name": "run_shell_command", "args": {"command": "echo hi"}}]}),
            {"text": "All done."},
            {"text": "Continued after the AfterAgent block."}])
        self.check_side_effect(run)
        self.assertEqual(len(run.requests), 3, "one AfterAgent continuation, not more" + self.ctx())
        self.assertEqual([c["stdin"]["stop_hook_active"] for c in self.calls("AfterAgent")], [False, True])
        self.assertEqual({c["event"] for c in self.calls()}, set(self.EVENTS))
        esc = {ev: lt_gt_escaped(self.marker(ev, self.sid)) for ev in self.EVENTS}

        # SessionStart: prepended to the prompt's text part of the first user message.
        ss = self.landing(run, esc["SessionStart"], 0, "text")
        self.assertEqual((ss.role, ss.path, ss.text), ("user", "contents[0].parts[1].text",
                                                        "<hook_context>%s</hook_context>\n\n%s"
                                                        % (esc["SessionStart"], PROMPT)), self.ctx())
        # BeforeAgent: its own text part after the prompt, in the same user content; again
        # on the continuation (with the new prompt = the AfterAgent reason).
        ba = [h for h in kit.gemini_find_marker(run.requests, esc["BeforeAgent"]) if h.request_index == 2]
        self.assertEqual(sorted({(h.index, h.path) for h in ba}), [(0, "contents[0].parts[2].text"),
                                                                   (4, "contents[4].parts[1].text")],
                         self.ctx())
        self.assertTrue(all(h.text == "<hook_context>%s</hook_context>" % esc["BeforeAgent"] for h in ba))
        # AfterTool: appended to the tool result, next request.
        at = self.landing(run, esc["AfterTool"], 1, "function_response_output")
        self.assertTrue(at.text.endswith("\n\n<hook_context>%s</hook_context>" % esc["AfterTool"]), at.short())
        # AfterAgent: reason verbatim (no escaping, no wrapper) as the only text of a new user content.
        raw = self.marker("AfterAgent", self.sid)
        aa = self.landing(run, raw, 2, "text")
        self.assertEqual((aa.role, aa.path, aa.text), ("user", "contents[4].parts[0].text", raw))
        self.assertEqual(self.calls("BeforeAgent")[1]["stdin"]["prompt"], raw)
        # Escaping: additionalContext gets < and > escaped, & and quotes stay.
        for ev in ("SessionStart", "BeforeAgent", "AfterTool"):
            self.assertFalse(kit.gemini_find_marker(run.requests, self.marker(ev, self.sid)),
                             "%s context arrived unescaped" % ev)
        self.assertIn('&lt;b&gt;x&lt;/b&gt; & "q"', ss.text)
        self.passed()

    def test_before_tool_deny_blocks_the_tool(self):
        ran = os.path.join(self.sb.proj, "tool-ran.txt")
        run = self.run_gemini([{"calls": [{"name": "run_shell_command", "args": {"command": "touch tool-ran.txt"}}]},
                               {"text": "It was blocked."}], deny=True)
        self.assertFalse(os.path.exists(ran), "the denied tool ran" + self.ctx())
        self.assertFalse(self.calls("AfterTool"), "AfterTool fired for a denied tool")
        deny = self.marker("BeforeTool", self.sid, deny=True)
        hit = self.landing(run, deny, 1, "function_response_error")
        self.assertEqual(hit.text, "Tool execution blocked: " + deny, self.ctx())
        self.passed()

    def test_hook_environment_under_github_actions(self):
        """Which variables reach a hook: everything Gemini inherits by default; under
        GITHUB_SHA (or SURFACE=Github) only an allowlist (HOME, PATH, LANG, TERM, ...),
        GEMINI_CLI_*, and Gemini's own GEMINI_* additions, unless settings
        security.environmentVariableRedaction.allowed names more, or a hook's "env" sets it."""
        seen = {}
        preloop = {"PRELOOP_URL": "http://127.0.0.1:9", "PRELOOP_TOKEN": "agt_e2e_fake"}
        variants = [
            ("default", {}, None, None),
            ("GITHUB_SHA", {"GITHUB_SHA": "0123456789abcdef0123456789abcdef01234567"}, None, None),
            ("SURFACE=Github", {"SURFACE": "Github"}, None, None),
            ("GITHUB_SHA + allowed", {"GITHUB_SHA": "0123"},
             {"security": {"environmentVariableRedaction": {"allowed": ["PRELOOP_HOME", "PRELOOP_URL",
                                                                        "PRELOOP_TOKEN"]}}}, None),
            ("GITHUB_SHA + hook env", {"GITHUB_SHA": "0123"}, None, {"PRELOOP_HOME": "/from/hook/env"}),
        ]
        for name, env, extra, hook_env in variants:
            sb = kit.Sandbox("plumbing-gemini-env", "/nonexistent")
            self.addCleanup(sb.close)
            log = os.path.join(sb.root, "fake-hook.jsonl")
            sb.hook_env = dict(preloop)
            sb.write_gemini_hooks({"SessionStart": kit.fake_hook_command(log, "SessionStart", "gemini")},
                                  extra=extra, hook_env=hook_env)
            sb.start_mock({"turns": [{"text": "done"}]}, "gemini")
            run = sb.run_gemini(PREREQ["gemini"], PROMPT, env=env)
            calls = kit.read_jsonl(log)
            self.assertEqual((run.rc, len(calls)), (0, 1), "%s: %s %s" % (name, run.stderr[-800:], calls))
            e = calls[0]["env"]
            seen[name] = e
            self.assertEqual(e.get("HOME"), sb.home, name)
            self.assertEqual(e.get("GEMINI_SESSION_ID"), run.session_id, name)
            self.assertEqual(e.get("GEMINI_PROJECT_DIR"), sb.proj, name)
            got = {k: e.get(k) for k in ("PRELOOP_HOME", "PRELOOP_URL", "PRELOOP_TOKEN")}
            want = {"PRELOOP_HOME": sb.preloop_home, **preloop}
            if name in ("GITHUB_SHA", "SURFACE=Github"):
                want = {k: None for k in want}
            elif name == "GITHUB_SHA + hook env":
                want = {"PRELOOP_HOME": "/from/hook/env", "PRELOOP_URL": None, "PRELOOP_TOKEN": None}
            self.assertEqual(got, want, "%s: hook env names %s" % (name, sorted(e)))
        strict = set(seen["GITHUB_SHA"])
        self.assertEqual(strict, {"CLAUDE_PROJECT_DIR", "GEMINI_CLI_NO_RELAUNCH", "GEMINI_CLI_TRUST_WORKSPACE",
                                  "GEMINI_CWD", "GEMINI_PLANS_DIR", "GEMINI_PROJECT_DIR", "GEMINI_SESSION_ID",
                                  "HOME", "LANG", "PATH", "PWD", "SHLVL", "TERM", "_"}, sorted(strict))
        self.assertEqual(set(seen["SURFACE=Github"]), strict)
        self.assertIn("GEMINI_API_KEY", seen["default"])
        self.passed()


# =============================================================================== Copilot

CAMEL = ("sessionStart", "userPromptSubmitted", "preToolUse", "postToolUse", "agentStop", "sessionEnd")
PASCAL = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop", "SessionEnd")
BASH = {"name": "bash", "arguments": {"command": "echo hi", "description": "say hi"}}
DATETIME_RE = r"<current_datetime>[^<]*</current_datetime>\n\n"


class TestCopilotPlumbing(_Plumbing):
    HARNESS = "copilot"

    def run_copilot(self, script, events=CAMEL, style="camel", deny=False):
        flags = ["--extra", EXTRA] + (["--deny"] if deny else [])
        self.sb.write_copilot_hooks({ev: kit.fake_hook_command(self.hook_log, ev, "copilot", *flags)
                                     for ev in events}, style=style)
        self.sb.start_mock(script, "copilot")
        self.sid = kit.new_session_id()
        self.run_result = run = self.sb.run_copilot(PREREQ["copilot"], PROMPT, session_id=self.sid)
        self.sb.mock.stop()
        self.assertEqual((run.rc, run.timed_out), (0, False), self.ctx())
        return run

    def message(self, body, index):
        return body["messages"][index]

    def only_landing(self, requests, marker, request_index, role, places=1):
        hits = kit.copilot_find_marker(requests, marker)
        first = kit.first_landing(hits)
        self.assertIsNotNone(first, "%r reached no request%s" % (marker, self.ctx(requests)))
        self.assertEqual((first.request_index, first.role), (request_index, role),
                         first.short() + self.ctx(requests))
        self.assertEqual(len({h.index for h in hits}), places, [h.short(80) for h in hits])
        return first

    def check_carriers(self, run, names):
        """sessionStart, userPromptSubmitted, preToolUse, postToolUse additionalContext and
        the agentStop block reason, at their exact places, verbatim. names: the five event
        names of the dialect, in that order."""
        ss, ups, pre, post, stop = (self.marker(n, self.sid) for n in names)
        self.assertEqual(len(run.requests), 3, "one agentStop continuation, not more" + self.ctx())
        r0, r1, r2 = run.requests
        # sessionStart: its own user message right after the system message, verbatim.
        h = self.only_landing(run.requests, ss, 0, "user")
        self.assertEqual((h.index, h.text), (1, ss))
        self.assertEqual(self.message(r0, 0)["role"], "system")
        # userPromptSubmitted: appended to the prompt's user message as a <system_reminder>
        # (it fires again for the continuation: a second place, checked below).
        h = self.only_landing(run.requests, ups, 0, "user", places=2)
        self.assertRegex(h.text, "^" + DATETIME_RE + re.escape(PROMPT + "\n\n<system_reminder>\n" + ups
                                                                + "\n</system_reminder>") + "$")
        # preToolUse: a new user message after the tool result, next request.
        h = self.only_landing(run.requests, pre, 1, "user")
        self.assertEqual(h.text, "Additional context from preToolUse hook:\n" + pre)
        self.assertEqual(self.message(r1, h.index - 1)["role"], "tool")
        # postToolUse: appended to the tool message.
        h = self.only_landing(run.requests, post, 1, "tool")
        self.assertTrue(h.text.startswith("hi\n"), h.short())
        self.assertTrue(h.text.endswith('\n\nTool "bash" succeeded. Additional guidance from postToolUse '
                                        'hooks:\n' + post), h.short())
        # agentStop block: the continuation's user message is the reason (+ the
        # userPromptSubmitted reminder, which fires for the continuation too).
        h = self.only_landing(run.requests, stop, 2, "user")
        self.assertEqual(h.index, len(r2["messages"]) - 1)
        self.assertRegex(h.text, "^" + DATETIME_RE)
        self.assertEqual(h.text, re.match(DATETIME_RE, h.text).group(0) + stop
                         + "\n\n<system_reminder>\n" + ups + "\n</system_reminder>")
        stops = self.calls(names[4])
        self.assertEqual([c["stdin"].get("stop_hook_active") for c in stops], [False, True])

    def test_camel_carriers_and_agent_stop_continuation(self):
        run = self.run_copilot({"turns": [self.side_effect_turn({"calls": [BASH]}), {"text": "All done."}],
                                "overflow": {"text": "Continued after the agentStop block."}})
        self.check_side_effect(run)
        calls = self.calls()
        self.assertEqual({c["event"] for c in calls}, set(CAMEL))
        self.assertTrue(all(c["stdin"].get("sessionId") == self.sid and "hook_event_name" not in c["stdin"]
                            for c in calls), "camelCase stdin with --session-id as sessionId")
        self.assertEqual(self.calls("preToolUse")[0]["stdin"]["toolName"], "bash")
        self.check_carriers(run, CAMEL[:5])
        self.passed()

    def check_deny(self, events, style):
        """preToolUse permissionDecision:"deny" + permissionDecisionReason (top-level) in
        this config style: the tool does not run, the reason is the tool message, the
        additionalContext of the same answer still arrives."""
        ran = os.path.join(self.sb.proj, "tool-ran.txt")
        run = self.run_copilot({"turns": [{"calls": [{"name": "bash", "arguments": {
            "command": "touch tool-ran.txt", "description": "write"}}]}, {"text": "It was blocked."}],
            "overflow": {"text": "Continued."}}, events=events, style=style, deny=True)
        self.assertFalse(os.path.exists(ran), "the denied tool ran" + self.ctx())
        self.assertFalse(self.calls(events[3]), "%s fired for a denied tool" % events[3])
        deny = self.marker(events[2], self.sid, deny=True)
        h = self.only_landing(run.requests, deny, 1, "tool")
        self.assertEqual(h.text, "Denied by preToolUse hook: " + deny)
        ctx = self.marker(events[2], self.sid)
        h = self.only_landing(run.requests, ctx, 1, "user")
        self.assertEqual(h.text, "Additional context from preToolUse hook:\n" + ctx)
        self.passed()

    def test_camel_pre_tool_use_deny(self):
        self.check_deny(CAMEL, "camel")

    def test_pascal_dialect_same_top_level_outputs(self):
        run = self.run_copilot({"turns": [{"calls": [BASH]}, {"text": "All done."}],
                                "overflow": {"text": "Continued."}}, events=PASCAL, style="pascal")
        calls = self.calls()
        self.assertEqual({c["event"] for c in calls}, set(PASCAL))
        self.assertTrue(all(c["stdin"].get("session_id") == self.sid and c["stdin"].get("hook_event_name") == c["event"]
                            for c in calls), "snake_case stdin with hook_event_name")
        self.assertEqual(self.calls("PreToolUse")[0]["stdin"]["tool_name"], "Bash")
        self.check_carriers(run, PASCAL[:5])
        self.passed()

    def test_pascal_pre_tool_use_deny(self):
        self.check_deny(PASCAL, "pascal")

    def test_subagent_hooks_and_where_their_context_lands(self):
        run = self.run_copilot({
            "turns": [{"calls": [{"name": "task", "arguments": {
                "name": "helper", "description": "run a helper", "prompt": "SUBAGENT-TASK: run echo sub",
                "agent_type": "general-purpose", "mode": "sync"}}]}, {"text": "Main done."}],
            "overflow": {"text": "Main continued."},
            "agents": [{"name": "sub", "match": "SUBAGENT-TASK", "turns": [
                {"calls": [{"name": "bash", "arguments": {"command": "echo sub", "description": "sub"}}]},
                {"text": "Sub done."}], "overflow": {"text": "Sub continued."}}]},
            events=CAMEL + ("subagentStart", "subagentStop"))
        sub_requests = run.agent_requests("sub")
        calls = self.calls()
        inside = [c for c in calls if c["stdin"].get("agentId")]
        self.assertEqual([c["event"] for c in inside],
                         ["subagentStart", "userPromptSubmitted", "preToolUse", "postToolUse", "agentStop",
                          "subagentStop"], self.ctx())
        aid = inside[1]["stdin"]["agentId"]
        for c in inside[1:5]:   # the sub-agent's own hooks: its id is the session id
            self.assertEqual((c["stdin"]["sessionId"], c["stdin"]["agentId"], c["stdin"]["parentAgentId"],
                              c["stdin"]["agentType"]), (aid, aid, self.sid, "general-purpose"), c)
        for c in (inside[0], inside[5]):   # subagentStart/Stop: the parent's session id
            self.assertEqual((c["stdin"]["sessionId"], c["stdin"]["agentId"]), (self.sid, aid), c)
        self.assertNotEqual(aid, self.sid)
        # The sub-agent's contexts reach only the sub-agent's requests.
        for ev, req, role in (("userPromptSubmitted", 0, "user"), ("preToolUse", 1, "user"), ("postToolUse", 1, "tool")):
            m = self.marker(ev, aid, agent=aid)
            self.only_landing(sub_requests, m, req, role)
            self.assertFalse(kit.copilot_find_marker(run.requests, m), "%s reached the main agent" % ev)
        # Its agentStop block is ignored: no continuation of the sub-agent, the reason nowhere.
        self.assertEqual(len(sub_requests), 2, self.ctx(sub_requests))
        stop = self.marker("agentStop", aid, agent=aid)
        self.assertFalse(kit.copilot_find_marker(sub_requests + run.requests, stop))
        # The main agent's own hooks around the task tool still land in the main requests.
        self.only_landing(run.requests, self.marker("postToolUse", self.sid), 1, "tool")
        self.only_landing(run.requests, self.marker("agentStop", self.sid), 2, "user")
        self.passed()


if __name__ == "__main__":
    unittest.main()
