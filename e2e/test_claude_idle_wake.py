"""End-to-end: an idle interactive Claude Code 2.1.328 session is woken by a note.

The real CLI runs in interactive mode on a pseudo-terminal (kit.PtyClaude) against
mock_anthropic.py, in local mode, with the project's hooks plus the background
watcher `preloop-claude-code-watch` registered as a second Stop and SessionStart
entry (`"async": true, "asyncRewake": true`; the entry WATCH_ENTRY below is the one
`preloop-hooks install` should write).

  idle wake   a prompt is typed, the turn ends (Stop), the session sits idle at its
              prompt; a note sent then (`preloop-hooks notes send --session <id>`) is
              in the next model request within seconds, with nothing typed; the
              receipt is delivered / stop; exactly one watcher runs per session;
              after /exit no watcher process of the session is left
  headless    `claude -p` with the same settings: the watcher stands down at once

Run from the repository root:
  python3 -m unittest -v e2e/test_claude_idle_wake.py
"""

import json
import os
import sys
import time
import unittest
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kit  # noqa: E402

PREREQ = kit.Prereq()
WATCH_BINARY = "preloop-claude-code-watch"
REWAKE_MESSAGE = "Preloop operator notes arrived while the session was idle:"  # what install writes
REWAKE_SUMMARY = "Preloop operator note"
WAKE_WITHIN_S = 5.0            # send -> model request


def setUpModule():
    PREREQ.get("claude", kit.ensure_claude)
    PREREQ.get("bin_dir", lambda: kit.build_binaries([WATCH_BINARY]))


class TestClaudeIdleWake(unittest.TestCase):

    def setUp(self):
        PREREQ.require(self, "claude", "bin_dir")
        self.sb = kit.Sandbox("idle-wake", PREREQ["bin_dir"], claude_bin=PREREQ["claude"])
        self.addCleanup(self.sb.close)
        # Wired the way a user wires it: `preloop-hooks install` adds the watcher
        # (async + asyncRewake) to SessionStart and Stop next to our other hooks.
        self.assertEqual(self.sb.install_hooks("claude-code"), "install")
        with open(self.sb.settings_path) as f:
            settings = json.load(f)
        for event in ("SessionStart", "Stop"):
            watchers = [h for g in settings["hooks"][event] for h in g["hooks"]
                        if h["command"].strip("'").endswith("/" + WATCH_BINARY)]
            self.assertEqual(len(watchers), 1, "install registers the watcher on %s: %s" % (event, settings))
            self.assertTrue(watchers[0]["async"] and watchers[0]["asyncRewake"])
        self.home_env = "PRELOOP_HOME=%s" % self.sb.preloop_home
        self.pty = None

    def watchers(self):
        """The watcher processes of this sandbox (not the `sh -c` Claude Code runs them with)."""
        return [(pid, cmd) for pid, cmd in kit.processes_with(WATCH_BINARY, env_has=self.home_env)
                if cmd.split()[0].endswith("/" + WATCH_BINARY)]

    def hook_log(self):
        path = os.path.join(self.sb.preloop_home, "log", "hooks.log")
        if not os.path.exists(path):
            return ""
        with open(path) as f:
            return f.read()

    def dump(self, msg):
        self.sb.keep = True
        out = ["", msg, "artifacts kept in %s (screen.log, requests.jsonl, claude.debug.log, "
               "cmdline.txt, preloop-home/)" % self.sb.root]
        if self.pty:
            reqs = self.pty.requests()
            out.append("model requests: %d" % len(reqs))
            out.append(kit.summarize_requests(reqs, markers=[self.marker]))
        out.append("watchers: %r" % (self.watchers(),))
        out.append("hooks.log:\n" + self.hook_log()[-4000:])
        out += self.sb.debug_log_hook_lines(40)
        return "\n".join(out)

    def check(self, cond, msg):
        if not cond:
            self.fail(self.dump(msg))

    def test_idle_session_is_woken_by_a_note(self):
        sb = self.sb
        self.marker = "E2E-WAKE-%s" % uuid.uuid4().hex[:10]
        sb.start_mock({"turns": [{"content": [{"type": "text", "text": "Hello. Done."}]}],
                       "overflow": {"content": [{"type": "text", "text": "Noted, thanks."}]},
                       "side_text": "OK"})
        sid = kit.new_session_id()
        self.pty = p = kit.PtyClaude(sb, sid)
        self.addCleanup(p.close)
        session_file = os.path.join(sb.preloop_home, "sessions", sid + ".json")
        lock_file = os.path.join(sb.preloop_home, "run", sid + ".watch")
        self.check(p.wait_until(lambda: os.path.exists(session_file), 30),
                   "SessionStart never registered the session")
        # The SessionStart watcher is up (one per session).
        self.check(p.wait_until(lambda: len(self.watchers()) == 1, 10), "no watcher after SessionStart")
        time.sleep(2.0)   # let the TUI settle at its prompt
        p.type("Say hello.")
        self.check(p.wait_until(lambda: len(p.requests()) >= 1 and " Stop mode=" in self.hook_log(), 30),
                   "the first turn never ended")
        # Idle now. The Stop watcher found the SessionStart one: still exactly one.
        time.sleep(3.0)
        self.check(len(p.requests()) == 1, "a request while idle before any note")
        ws = self.watchers()
        self.check(len(ws) == 1, "exactly one watcher while idle, got %r" % (ws,))
        with open(lock_file) as f:
            self.check(f.read().strip() == str(ws[0][0]), "the lock file names the live watcher")
        self.check("another watcher runs for this session" in self.hook_log(),
                   "the Stop watcher should have stood down")

        t_send = time.time()
        receipt = sb.send_note(sid, "Please also update the changelog. " + self.marker)
        note_id = receipt["note_id"]
        got = p.wait_until(lambda: len(p.requests()) >= 2, 20)
        self.check(got, "the idle session was not woken by the note")
        rec = [r for r in sb.mock.records()
               if r.get("route") == "messages" and r.get("reply", {}).get("kind") == "main"][1]
        delay = rec["ts"] - t_send
        sys.stderr.write("\n[idle-wake] send -> model request: %.2f s\n" % delay)
        self.check(delay < WAKE_WITHIN_S, "woken after %.2f s (want < %s s)" % (delay, WAKE_WITHIN_S))

        hits = kit.find_marker(p.requests(), self.marker)
        self.check(hits and all(h.request_index == 1 for h in hits),
                   "the note must be in request #1 only: %r" % [h.short() for h in hits])
        seg = hits[0].text
        blocks = kit.note_blocks(seg)
        self.check(len(blocks) == 1 and blocks[0][2][0]["id"] == note_id,
                   "one framed block with the note id: %r" % kit.shorten(seg, 600))
        req1 = json.dumps(p.requests()[1])
        self.check(REWAKE_MESSAGE in req1, "the rewakeMessage label precedes the block")
        r = sb.wait_note_state(note_id, {"delivered"})
        self.check((r.get("state"), r.get("delivery_event")) == ("delivered", "stop"),
                   "receipt %r" % r)

        # The wake turn ended (Stop): a new watcher, still one.
        self.check(p.wait_until(lambda: len(self.watchers()) == 1, 10),
                   "no watcher after the wake turn")
        # Leave: no watcher left behind.
        status = p.exit()
        self.check(status is not None, "claude did not exit")
        self.check(p.wait_until(lambda: not self.watchers(), 5) is not None or not self.watchers(),
                   "watcher processes left after exit: %r" % (self.watchers(),))
        self.check(not self.watchers(), "watcher processes left after exit")

    def test_headless_run_starts_no_watcher(self):
        sb = self.sb
        self.marker = "unused"
        sb.start_mock({"turns": [{"content": [{"type": "text", "text": "Done."}]}]})
        sid = kit.new_session_id()
        run = sb.run_claude("Say hello.", sid)
        self.check(run.rc == 0, "claude -p failed: rc=%s %s" % (run.rc, run.stderr[-500:]))
        self.check(not self.watchers(), "a watcher outlived claude -p")
        lines = [l for l in self.hook_log().splitlines() if " Watch " in l]
        self.check(lines and all("stand_down" in l and "headless run" in l for l in lines),
                   "every watcher stood down: %r" % lines)
        self.check(not os.path.exists(os.path.join(sb.preloop_home, "run", sid + ".watch")),
                   "no lock taken")


if __name__ == "__main__":
    unittest.main()
