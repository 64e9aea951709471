"""Scenario, the base of every scenario mixin: per-test state, check() that fails with the
whole failure dump (artifacts, wiring, receipts, every model request, hook logs), unique
markers, and the receipt and block checks every harness and mode shares."""

import json
import os
import uuid

from ..blocks import note_blocks
from ..claude import bash_turn, text_turn
from ..mock import Mock
from ..common import KitError, shorten
from ..report import SUMMARIZERS, before_reply_lines
from ..sandbox import Sandbox

__all__ = ["TERMINAL_STATES", "Scenario", "ScenarioFailure"]

TERMINAL_STATES = {"delivered", "expired", "cancelled", "undeliverable"}


class ScenarioFailure(AssertionError):
    pass


class Scenario:
    """Mixed into a unittest.TestCase (see kit/scenarios/__init__.py). Subclasses set:
    HARNESS ("claude" | "codex" | "gemini" | "copilot"), PREREQ (a Prereq) and PREREQS
    (names it needs)."""

    HARNESS = None
    MODE = None                 # "local" | "real server" (set by the mode mixin)
    EXPECT_AUTH = None          # the auth attribute a delivered note's block must carry
    TOKEN_PREFIX = "E2E"
    PREREQ = None
    PREREQS = ()
    ARTIFACTS = "requests.jsonl, cmdline.txt, home/, preloop-home/"

    # ------------------------------------------------------------------ state
    def setUp(self):
        if self.PREREQ is not None:
            self.PREREQ.require(self, *self.PREREQS)
        self.sb = None
        self.scenario = None
        self.run_result = None
        self.receipts = {}
        self.sent = {}          # note id -> what sending it answered
        self.note_ids = []
        self.markers = []
        self.extra = []         # further lines for the failure dump
        self.wiring = None
        self.sid = None         # the run's session id when the test picks it (Claude Code)

    def bin_dir(self):
        return self.PREREQ["bin_dir"]

    def label(self):
        return self.MODE

    def new_sandbox(self, scenario):
        self.scenario = "%s %s [%s]" % (self.HARNESS, scenario, self.label())
        slug = "%s-%s-%s" % ("srv" if self.MODE != "local" else "loc", self.HARNESS,
                             scenario.split(":")[0])
        self.sb = Sandbox(slug, self.bin_dir(),
                          claude_bin=self.PREREQ["claude"] if self.HARNESS == "claude" else None)
        self.addCleanup(self.sb.close)
        try:
            self.prepare_mode(self.sb)
        except KitError as e:
            raise ScenarioFailure(self.report("setup failed: %s" % e))
        return self.sb

    def prepare_mode(self, sb):
        """Mode hook: server mode mints an agent and sets hook_env / mock_env."""

    # ------------------------------------------------------------------ checks + dump
    def check(self, cond, msg):
        if not cond:
            raise ScenarioFailure(self.report(msg))

    def token(self, tag):
        """A unique marker to put in a note body (listed in failure dumps)."""
        t = "%s-%s-%s" % (self.TOKEN_PREFIX, tag, uuid.uuid4().hex[:10])
        self.markers.append(t)
        return t

    def report(self, msg):
        sb, run = self.sb, self.run_result
        out = ["", "SCENARIO %s: %s" % (self.scenario, msg)]
        if sb:
            sb.keep = True
            out.append("artifacts kept in %s (%s)" % (sb.root, self.ARTIFACTS))
            if self.wiring:
                out.append("hooks wired by: %s" % self.wiring)
            if sb.install_output:
                out.append("install: " + shorten(sb.install_output, 800))
        out.extend(self.mode_lines())
        out.extend(self.extra)
        if run:
            out.append(run.headline())
            out.extend(self.run_lines(run))
            if run.during:
                out.append("during the run: " + shorten(json.dumps(run.during, ensure_ascii=False), 1500))
            out.extend(before_reply_lines(run))
        for nid in self.note_ids:
            try:
                r = self.receipt_now(nid)   # fresh: the state now, not when last checked
            except Exception as e:   # noqa: BLE001 -- a dump must not hide the failure
                r = self.receipts.get(nid) or "unreadable: %s" % e
            out.append("receipt %s: %s" % (self.receipt_where(nid), json.dumps(r, ensure_ascii=False)))
        if run:
            out.append("model requests (new messages/items only; markers: %s):" % ", ".join(self.markers))
            out.append(SUMMARIZERS[run.harness](run.requests, self.markers))
        if sb:
            out.extend(self.harness_log_lines())
            lines = sb.preloop_log_lines()
            if lines:
                out.append("PRELOOP_HOME/log:")
                out.extend("  " + l for l in lines)
        out.extend(self.mode_tail())
        return "\n".join(out)

    def run_lines(self, run):
        """Harness hook: what of the harness's own output goes into a failure dump."""
        return ["stdout: " + shorten(run.stdout, 600), "stderr: " + shorten(run.stderr, 600)]

    def harness_log_lines(self):
        return []

    def mode_lines(self):
        return []

    def mode_tail(self):
        return []

    # ------------------------------------------------------------------ notes + receipts
    def add_sent(self, sent, what):
        self.check(isinstance(sent, dict) and sent.get("note_id"),
                   "%s answered no note_id: %r" % (what, sent))
        if sent["note_id"] not in self.note_ids:
            self.note_ids.append(sent["note_id"])
        self.sent[sent["note_id"]] = sent
        return sent

    def worker_mock(self, sb, first_cmd):
        """The model of the `claude -p` workers a conductor starts: a tool call running
        `first_cmd` (it waits until the conductor sent its note), one more tool call (its
        PreToolUse carries the note), then the end. Its own mock, stopped at cleanup."""
        script = {"turns": [
            bash_turn(first_cmd),
            bash_turn("echo continuing", "Continuing."),
            text_turn("Wrapped up."),
        ]}
        wdir = os.path.join(sb.root, "worker-mock")
        os.makedirs(wdir, exist_ok=True)
        wmock = Mock(wdir, script, dict(sb.base_env(), **sb.mock_env))
        self.addCleanup(wmock.stop)
        return wmock

    def check_children_sent(self, sent_text, workers, shell="shell"):
        """What a conductor's `notes send --children all --json … ; echo rc=$?` printed:
        it succeeded and went to exactly `workers` (harness session ids); the notes."""
        self.extra.append("conductor's notes send: " + shorten(sent_text, 1500))
        self.check("rc=0" in sent_text,
                   "`notes send --children all` in the conductor's %s failed: %s" % (shell, sent_text))
        sent = json.loads(sent_text[:sent_text.rindex("rc=")])
        notes = sent.get("notes") or []
        for n in notes:
            self.add_sent({"note_id": n["note_id"]}, "notes send --children all")
        got = sorted(n.get("session") or "" for n in notes)
        self.check(got == sorted(workers), "the note went to %r, want the workers %r" % (got, sorted(workers)))
        return notes

    def send_before_start(self, body, **target):
        """Send a note before the harness starts (mode: to this run's session, the
        harness's next session, or the agent)."""
        try:
            sent = self.note_before_start(body, **target)
        except KitError as e:
            raise ScenarioFailure(self.report("sending the note failed: %s" % e))
        return self.add_sent(sent, "sending the note before the run")

    def sent_in_turn(self, run, turn, agent=None):
        """What the before_reply_cmd the mock ran before answering `turn` (of `agent`, if
        given) printed: the JSON of the note it sent."""
        recs = [r for r in run.records if r.get("before_reply")
                and r.get("reply", {}).get("turn") == turn and not r["before_reply"].get("skipped")
                and (agent is None or r.get("reply", {}).get("agent") == agent)]
        self.check(recs, "the mock never ran the before_reply_cmd of turn %d (the conversation "
                         "did not reach that turn)" % turn)
        br = recs[0]["before_reply"]
        try:
            sent = json.loads(br.get("stdout", ""))
        except ValueError:
            sent = None
        if isinstance(sent, dict) and sent.get("note_id"):
            self.add_sent(sent, "")
        self.check(br.get("rc") == 0, "`%s` (run by the mock before answering turn %d) exited %s: "
                   "stdout=%r stderr=%r" % (" ".join(map(str, br.get("argv", []))), turn, br.get("rc"),
                                            br.get("stdout"), br.get("stderr")))
        self.add_sent(sent, "`%s`" % " ".join(map(str, br.get("argv", []))))
        self.check_sent_to_run(sent)
        return sent

    def check_receipt(self, note_id, state, event=None, reason=None):
        """Wait for a terminal state; check state, delivery event/channel/time or the
        undeliverable reason, and (mode) what the note is bound to."""
        try:
            r = self.wait_receipt(note_id, TERMINAL_STATES)
        except KitError as e:
            raise ScenarioFailure(self.report("reading the receipt failed: %s" % e))
        self.receipts[note_id] = r
        where = "receipt %s = %s" % (self.receipt_where(note_id), json.dumps(r, ensure_ascii=False))
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
        self.check_binding(r, where)
        return r

    def check_block(self, text, note_id, body):
        """The text holds a full <operator-notes count="1" source="preloop-control-plane">
        block with exactly this note (id attribute = the note id, body verbatim, the
        mode's auth); returns (block, element)."""
        blocks = [b for b in note_blocks(text) if any(e["id"] == note_id for e in b[2])]
        self.check(blocks, "no complete <operator-notes count=.. source=\"preloop-control-plane\">"
                           "...</operator-notes> block holding note %s found in: %r"
                   % (note_id, shorten(text, 1500)))
        block, count, elements = blocks[0]
        self.check(count == 1 and len(elements) == 1,
                   "block has count=%d and %d <operator-note> elements, want 1 and 1: %r"
                   % (count, len(elements), shorten(block, 1500)))
        self.check(elements[0]["body"] == body, "note body in the block is %r, want %r"
                   % (elements[0]["body"], body))
        if self.EXPECT_AUTH:
            self.check(elements[0]["auth"] == self.EXPECT_AUTH, "auth=%r in the block, want %r: %r"
                       % (elements[0]["auth"], self.EXPECT_AUTH, shorten(block, 800)))
        return block, elements[0]
