"""The terminal UIs themselves, end to end: the real interactive `pi` (0.73.1) and `opencode`
(1.18.33) on a pseudo-terminal (kit/tty.py), a prompt typed as a person types it, with our
extension/plugin as `preloop-hooks install` lays it down, the shipped executable
(PRELOOP_BIN_DIR) and the mock models, local inbox.

The other suites drive the same code paths headless (Pi's RPC mode, `opencode serve`); these
prove that what they stand in for holds where people use it:

  idle   a note sent while the TUI sits idle after a turn starts a turn that carries it (the
         idle watcher), and nothing is woken while nothing is pending
  late   a note that arrives while the model gives its final answer continues the run once
  quit   quitting the TUI (Pi `/quit`, OpenCode `/exit`) ends the session: a note still
         pending becomes `undeliverable` (session_ended), and the end is in the hook log

  python3 -m unittest e2e.test_tui -v     (PRELOOP_BIN_DIR=<release dir>, PRELOOP_E2E_HARNESS_DIR)
"""

import os
import sys
import time
import unittest

E2E = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, E2E)

from kit import ensure_opencode, ensure_pi  # noqa: E402
from kit.tty import Tty  # noqa: E402
from test_opencode import OpenCodeWorld  # noqa: E402
from test_pi import PiWorld, last_user, where  # noqa: E402

# The local watcher's poll; the wake is asserted well inside its bounds.
FAST_WATCH = {"PRELOOP_WATCH_POLL_MS": "300"}
WATCH_OFF = {"PRELOOP_WATCH": "off"}


class TuiCase:
    """What the two TUIs share; a subclass says how to start one and what it shows when ready."""

    quit_command = None

    def world(self, name, script, extra_env):
        raise NotImplementedError

    def start(self, w):
        raise NotImplementedError

    def ready(self, screen):
        raise NotImplementedError

    def tui(self, name, script, extra_env):
        w = self.world(name, script, extra_env)
        self.addCleanup(w.close)
        t = self.start(w)
        self.addCleanup(t.close)
        t.wait_for(lambda: self.ready(t.screen()), 90, "the TUI did not come up")
        time.sleep(1.5)  # the input takes keys a moment after it is drawn
        return w, t

    def prompt(self, w, t, text, n=1):
        """Type `text` and wait until the model has had `n` requests and the turn ended (the
        hook log's turn-end line)."""
        t.type(text)
        t.wait_for(lambda: len(w.requests()) >= n, 60, "the prompt reached no model")
        t.wait_for(lambda: self.turn_end in w.hook_log(), 60, "the turn did not end")

    def test_idle_a_note_sent_while_the_tui_sits_idle_starts_a_turn(self):
        w, t = self.tui("idle", {"turns": [{"text": "All done."}, {"text": "Woken and noted."}],
                                 "overflow": {"text": "Again."}}, FAST_WATCH)
        self.prompt(w, t, "Say hi")
        time.sleep(2.5)
        self.assertEqual(len(w.requests()), 1, "woken with no note pending")
        note_id = w.send_note("MARK-tui-idle deploy to eu-west-1")
        t.wait_for(lambda: len(w.requests()) >= 2, 20, "the idle TUI was not woken")
        reqs = w.requests()
        self.assertIn("MARK-tui-idle", last_user(reqs[1]))
        self.assertEqual(len(where(reqs[1], "MARK-tui-idle")), 1, "the note once")
        r = w.wait_receipt(note_id, ("delivered",))
        self.assertEqual((r["state"], r["delivery_event"]), ("delivered", "stop"), r)
        t.wait_for(lambda: "Woken and noted." in t.screen(), 30, "the woken turn's answer is not on the screen")
        time.sleep(2.5)
        self.assertEqual(len(w.requests()), 2, "the woken turn ended with nothing pending: no more turns")

    def test_late_a_note_during_the_final_answer_continues_the_run_once(self):
        def script(w):
            return {"turns": [{"text": "All done.", "before_reply_cmd": w.send_cmd("MARK-tui-late check the logs")},
                              {"text": "Checked the logs."}], "overflow": {"text": "Again."}}
        w, t = self.tui("late", script, WATCH_OFF)
        t.type("Say hi")
        t.wait_for(lambda: len(w.requests()) >= 2, 60, "the late note did not continue the run")
        reqs = w.requests()
        self.assertIn("MARK-tui-late", last_user(reqs[1]))
        sent = reqs[0].get("before_reply") or {}
        self.assertEqual(sent.get("rc"), 0, sent)
        t.wait_for(lambda: "Checked the logs." in t.screen(), 30, "the continuation's answer is not on the screen")
        time.sleep(2)
        self.assertEqual(len(w.requests()), 2, "continued once")

    def test_quit_ends_the_session_and_a_pending_note_becomes_undeliverable(self):
        w, t = self.tui("quit", {"turns": [{"text": "All done."}]}, WATCH_OFF)
        self.prompt(w, t, "Say hi")
        note_id = w.send_note("MARK-tui-quit too late")
        t.type(self.quit_command)
        t.wait_for(lambda: t.proc.poll() is not None, 30, "%s did not quit" % self.quit_command)
        self.assertEqual(t.proc.returncode, 0, t.screen()[-2000:])
        r = w.wait_receipt(note_id, ("undeliverable",))
        self.assertEqual((r["state"], r["undeliverable_reason"]), ("undeliverable", "session_ended"), r)
        self.assertIn("never_read=1", w.hook_log())
        self.assertEqual(len(w.requests()), 1)


class PiTui(TuiCase, unittest.TestCase):
    """Interactive `pi` (its TUI), the extension in ~/.pi/agent/extensions/."""

    quit_command = "/quit"
    turn_end = " agent_end "

    def world(self, name, script, extra_env):
        return PiWorld("tui-" + name, script, extra_env)

    def start(self, w):
        return Tty([ensure_pi(), "--provider", "mock", "--model", "mock-model", "--offline", "--no-session"],
                   w.env, w.proj)

    def ready(self, screen):
        return "mock-model" in screen


class OpenCodeTui(TuiCase, unittest.TestCase):
    """Interactive `opencode` (its TUI), the plugin in ~/.config/opencode/plugins/."""

    quit_command = "/exit"
    turn_end = " experimental.text.complete "

    def world(self, name, script, extra_env):
        return OpenCodeWorld("tui-" + name, script, extra_env)

    def start(self, w):
        return Tty([ensure_opencode()], w.env, w.proj)

    def ready(self, screen):
        return "Ask anything" in screen


if __name__ == "__main__":
    unittest.main()
