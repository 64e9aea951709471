"""Lineage by process ancestry, end to end with the real harnesses (docs/guarantees.md,
"Lineage"): conductors whose harness cannot export PRELOOP_PARENT_SESSION_ID to the
commands the model runs still find the workers their shell tool started.

  codex_claude   a Codex 0.169.0 conductor (`codex exec`, mock_openai.py) whose shell tool
                 starts two `claude -p` workers (Claude Code 2.1.328, their own
                 mock_anthropic.py) with `nohup … &`, waits until both sit in a tool call,
                 then runs `preloop-hooks notes send --children all` with no --parent and no
                 variable: the CLI finds the conductor among its own ancestors, each worker's
                 SessionStart found it among its ancestors. Both workers' next request after
                 their next tool call carries the note; both receipts end `delivered`;
                 `sessions list --parent <conductor>` lists exactly the two.
  gemini_codex   a Gemini CLI 0.61.0 conductor (`gemini -p`, mock_gemini.py) whose shell tool
                 starts a `codex exec` worker (its own mock_openai.py) the same way; the
                 worker's next request after its next tool call carries the note.
  copilot_claude a Copilot CLI 1.0.102 conductor (`copilot -p`, BYOK offline, mock_copilot.py)
                 whose bash tool starts a `claude -p` worker the same way.

Each on the local inbox (TestLineageLocal) and against the real Preloop 0.17.1 server
(TestLineageServer). There the machine is set up the way a user does it once: `preloop-hooks
login --url URL` (the agent's runtime token, for the hooks) and `login --user` (the operator's
token, for `notes send`) into $PRELOOP_HOME/config.json, and no harness gets a Preloop variable
but PRELOOP_HOME: the conductor, its workers and its `notes send` all find the server there,
whatever a harness passes to the commands its shell tool runs. Besides the
local checks, the server's own record of each worker (GET /api/v1/runtime-sessions/{id})
names the conductor as `parent_session_id`, and `--children all` is resolved by the server.

Missing prerequisites fail the tests (kit.Prereq), never skip them. Run alone:
  python3 -m unittest -v e2e/test_lineage.py
"""

import json
import os
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kit  # noqa: E402

PREREQ = kit.Prereq()


def setUpModule():
    PREREQ.get("bin_dir", lambda: kit.build_binaries(kit.CODEX_HOOK_BINARIES))
    PREREQ.get("install", lambda: kit.require_install(PREREQ["bin_dir"], "codex"))
    PREREQ.get("install_gemini", lambda: kit.require_install(PREREQ["bin_dir"], "gemini"))
    PREREQ.get("claude", kit.ensure_claude)
    PREREQ.get("codex", kit.ensure_codex)
    PREREQ.get("gemini", kit.ensure_gemini)
    PREREQ.get("install_copilot", lambda: kit.require_install(PREREQ["bin_dir"], "copilot"))
    PREREQ.get("copilot", kit.ensure_copilot)
    kit.require_server(PREREQ, wiring="`preloop-hooks install` and `preloop-hooks login` (config.json)")


def tearDownModule():
    kit.release_server(PREREQ)


WAIT_SH = """#!/bin/sh
# wait.sh count N DIR | wait.sh grep TEXT FILE...: until DIR holds N entries, or every FILE
# holds TEXT; 120 s at most. (A script: Gemini CLI refuses $(...) in a command line.)
what=$1; shift
i=0
while [ "$i" -lt 1200 ]; do
  case $what in
    count) [ "$(ls "$2" | wc -l)" -ge "$1" ] && exit 0 ;;
    grep) t=$1; shift; ok=1; for f in "$@"; do grep -qF -- "$t" "$f" 2>/dev/null || ok=0; done
          [ $ok = 1 ] && exit 0; set -- "$t" "$@" ;;
  esac
  sleep 0.1; i=$((i+1))
done
exit 1
"""


def wait_sh(sb):
    path = os.path.join(sb.root, "wait.sh")
    with open(path, "w") as f:
        f.write(WAIT_SH)
    os.chmod(path, 0o755)
    return q(path)


def q(s):
    return kit.quote_path(s)


class _Lineage(kit.Scenario):
    HARNESS = "codex"
    PREREQ = PREREQ
    PREREQS = ("bin_dir", "install", "install_gemini", "install_copilot", "claude", "codex", "gemini", "copilot")
    TOKEN_PREFIX = "E2E-LIN"
    ARTIFACTS = "requests.jsonl, worker-mock/requests.jsonl, worker-*.out, conductor-send.out, home/, preloop-home/"

    def label(self):
        return self.MODE

    def sandbox(self, scenario):
        """A sandbox; in server mode the machine logged in the way a user does it once
        (`preloop-hooks login`, `login --user`: $PRELOOP_HOME/config.json) and no Preloop
        variable in any harness's environment."""
        sb = self.new_sandbox(scenario)
        if self.MODE == "local":
            return sb
        url = PREREQ["creds"]["base_url"]
        for args, secret in ((("login", "--url", url), self.agent["agent_token"]),
                             (("login", "--user", "--url", url), PREREQ["creds"]["user_token"])):
            p = subprocess.run(sb.cli_argv(*args), input=secret, env=sb.base_env(), cwd=sb.root,
                               capture_output=True, text=True, timeout=60)
            self.check(p.returncode == 0, "`preloop-hooks %s` failed: %s%s" % (" ".join(args), p.stdout, p.stderr))
        sb.hook_env = {}
        return sb

    def session_file(self, sb, sid):
        try:
            with open(os.path.join(sb.preloop_home, "sessions", sid + ".json")) as f:
                return json.load(f)
        except (OSError, ValueError):
            return {}

    def sessions(self, sb):
        d = os.path.join(sb.preloop_home, "sessions")
        out = []
        for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
            try:
                with open(os.path.join(d, name)) as f:
                    out.append(json.load(f))
            except (OSError, ValueError):
                pass
        return out

    def conductor_sandbox(self, scenario, tag):
        """A conductor scenario's sandbox and pieces: (sandbox, the note's token, the note,
        the flag file the conductor writes once it sent the note, the directory each worker
        reports ready in)."""
        sb = self.sandbox(scenario)
        tok = self.token(tag)
        ready = os.path.join(sb.root, "ready")
        os.makedirs(ready, exist_ok=True)
        return sb, tok, "%s Wrap up now and report." % tok, os.path.join(sb.root, "note-sent.flag"), ready

    def run_conductor(self, sb, harness, prompt, timeout, **kw):
        """Run the conductor (`sb.run_<harness>`) on `prompt`, stop its mock, and check
        that it finished cleanly."""
        try:
            self.run_result = getattr(sb, "run_" + harness)(PREREQ[harness], prompt, timeout=timeout, **kw)
        finally:
            sb.mock.stop()
        run = self.run_result
        self.check(not run.timed_out and run.rc == 0, "the conductor did not finish cleanly (rc=%s)" % run.rc)

    def send_cmd(self, sb, body, out):
        """The conductor's shell: notes send --children all, no --parent, no variable."""
        return "%s notes send --children all --json %s >%s 2>&1; echo rc=$? >>%s" % (
            q(sb.bin(kit.CLI_BINARY)), q(body), q(out), q(out))

    def check_sent(self, sent_text, workers):
        return self.check_children_sent(sent_text, workers)

    def check_lineage(self, sb, conductor, workers):
        cond = self.session_file(sb, conductor)
        self.extra.append("conductor session file: %s" % json.dumps(cond))
        self.check(cond.get("harness_process"), "the conductor's session file records no harness process")
        self.check(cond.get("mode") == ("local" if self.MODE == "local" else "server"),
                   "the conductor's session is in mode %r" % cond.get("mode"))
        for w in workers:
            f = self.session_file(sb, w)
            self.extra.append("worker session file: %s" % json.dumps(f))
            self.check(f.get("parent_session_id") == cond.get("runtime_session_id"),
                       "worker %s has parent %r, want the conductor %r"
                       % (w, f.get("parent_session_id"), cond.get("runtime_session_id")))
            if self.MODE != "local":
                rec = self.server().must((200,), "GET", "/runtime-sessions/%s" % f["runtime_session_id"])
                rec = rec.get("session", rec)
                self.extra.append("server record of worker %s: %s" % (w, kit.shorten(json.dumps(rec), 800)))
                self.check(rec.get("parent_session_id") == cond.get("runtime_session_id"),
                           "the server records worker %s with parent %r, want the conductor %r"
                           % (w, rec.get("parent_session_id"), cond.get("runtime_session_id")))
        listed = sb.cli_json("sessions", "list", "--parent", conductor, "--json")
        self.extra.append("sessions list --parent: %s" % kit.shorten(json.dumps(listed), 1500))
        got = sorted(s["runtime_session_id"] for s in listed.get("sessions") or [])
        want = sorted(self.session_file(sb, w).get("runtime_session_id") for w in workers)
        self.check(got == want, "sessions list --parent %s: %r, want the workers %r" % (conductor, got, want))

    def wait_outputs(self, outs, marker, timeout=120):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if all(marker in kit.read_text(o) for o in outs):
                break
            time.sleep(0.5)
        for o in outs:
            self.extra.append("%s: %s" % (os.path.basename(o), kit.shorten(kit.read_text(o) or "(none)", 600)))
        time.sleep(2.0)   # their SessionEnd hooks

    def check_receipts(self, notes):
        for n in notes:
            r = self.wait_receipt(n["note_id"], kit.TERMINAL_STATES)
            self.check(r.get("state") == "delivered", "receipt of %s: %r" % (n["note_id"], r))
            self.check(r.get("delivery_event") == "pre_tool_use", "delivery_event %r" % r.get("delivery_event"))

    # ------------------------------------------------------------------ claude -p workers
    def claude_workers(self, sb, names, flag, ready):
        """Claude Code workers against their own mock: each waits in a Bash call until the
        note was sent (`flag`), then makes one more Bash call (its PreToolUse carries the
        note), then ends. Returns ({name: session id}, the mock, the shell line starting
        them all in the background)."""
        sb.claude_bin = PREREQ["claude"]
        sb.write_settings()   # the workers' Claude Code hooks
        workers = {n: kit.new_session_id() for n in names}
        wmock = self.worker_mock(sb, "touch %s/$$; %s grep sent %s; echo go" % (q(ready), wait_sh(sb), q(flag)))
        # The workers' settings are inline (the conductor's mock is not theirs). Codex
        # ends the process group of a command when it returns, so the workers get their own
        # session (`setsid`, which does not fork here: the shell stays their parent).
        worker_env = "ANTHROPIC_BASE_URL=%s ANTHROPIC_API_KEY=%s IS_SANDBOX=1 DISABLE_TELEMETRY=1 " \
                     "DISABLE_AUTOUPDATER=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1" % (wmock.url, kit.MOCK_API_KEY)
        spawn = " ".join(
            "%s setsid nohup %s -p %s --output-format json --dangerously-skip-permissions --session-id %s "
            "--debug-file %s >%s 2>&1 &" % (
                worker_env, q(sb.claude_bin), q("worker %s: fix the flaky test" % name), sid,
                q(os.path.join(sb.root, "worker-%s.debug.log" % name)),
                q(os.path.join(sb.root, "worker-%s.out" % name)))
            for name, sid in workers.items())
        return workers, wmock, spawn

    def check_claude_workers_got_it(self, wmock, workers, tok):
        records = wmock.records()
        for name in workers:
            reqs = [r.get("body") or {} for r in records
                    if r.get("route") == "messages" and (r.get("reply") or {}).get("kind") == "main"
                    and ("worker %s" % name) in json.dumps((r.get("body") or {}).get("messages", [])[:1])]
            first = kit.first_hit(kit.find_marker(reqs, tok))
            self.check(first is not None, "worker %s never got the note (%d requests): %s"
                       % (name, len(reqs), kit.summarize_requests(reqs, [tok])))
            self.check(first.request_index == 2 and first.label == kit.LABEL_PRE_TOOL_USE_BASH,
                       "worker %s got the note in request #%d under %r, want #2 under PreToolUse:Bash"
                       % (name, first.request_index, first.label))

    # ------------------------------------------------------------------ Codex -> claude -p
    def test_codex_conductor_steers_two_claude_workers(self):
        sb, tok, body, flag, ready = self.conductor_sandbox(
            "lineage: a Codex conductor's shell starts two claude -p workers", "CX2CC")
        workers, wmock, spawn = self.claude_workers(sb, ("A", "B"), flag, ready)
        send_out = os.path.join(sb.root, "conductor-send.out")
        conductor = {"agents": [{"name": "main", "turns": [
            {"calls": [{"cmd": "%s %s count 2 %s; echo spawned" % (spawn, wait_sh(sb), q(ready)),
                        "yield_time_ms": 120000}]},
            # Then wait for both (a run that ends takes its children's shells with it).
            {"calls": [{"cmd": "%s; echo sent >%s; %s grep '\"result\"' %s" % (
                self.send_cmd(sb, body, send_out), q(flag), wait_sh(sb),
                " ".join(q(os.path.join(sb.root, "worker-%s.out" % n)) for n in workers)),
                "yield_time_ms": 120000}]},
            {"text": "Both workers were told."}], "overflow": {"text": "Nothing more."}}]}
        sb.start_mock(conductor, "openai")
        sb.write_codex_config()
        sb.install_hooks("codex")
        self.wiring = "preloop-hooks install --harness codex --scope user; kit.Sandbox.write_settings (workers)"
        self.run_conductor(sb, "codex", "Start two workers, then tell them to wrap up.",
                           float(os.environ.get("PRELOOP_E2E_CODEX_TIMEOUT", "90")) * 3)
        outs = [os.path.join(sb.root, "worker-%s.out" % n) for n in workers]
        self.wait_outputs(outs, '"result"')
        cond = [s["external_session_id"] for s in self.sessions(sb) if s.get("agent_kind") == "codex_cli"]
        self.check(len(cond) == 1, "want one Codex session, got %r" % cond)
        notes = self.check_sent(kit.read_text(send_out), workers.values())
        self.check_lineage(sb, cond[0], list(workers.values()))
        self.check_claude_workers_got_it(wmock, workers, tok)
        self.check_receipts(notes)

    # ------------------------------------------------------------------ Gemini -> codex exec
    def test_gemini_conductor_steers_a_codex_worker(self):
        sb, tok, body, flag, ready = self.conductor_sandbox(
            "lineage: a Gemini conductor's shell starts a codex exec worker", "GM2CX")
        # The worker: Codex against its own mock, hooks installed into the sandbox's CODEX_HOME.
        worker_script = {"agents": [{"name": "main", "turns": [
            {"calls": [{"cmd": "touch %s/w; %s grep sent %s; echo go" % (q(ready), wait_sh(sb), q(flag)),
                        "yield_time_ms": 120000}]},
            {"calls": [{"cmd": "echo continuing"}]},
            {"text": "Wrapped up."}], "overflow": {"text": "Nothing more."}}]}
        wdir = os.path.join(sb.root, "worker-mock")
        os.makedirs(wdir, exist_ok=True)
        wmock = kit.Mock(wdir, worker_script, dict(sb.base_env(), **sb.mock_env), api="openai")
        self.addCleanup(wmock.stop)
        sb.mock = wmock
        sb.write_codex_config()
        sb.install_hooks("codex")
        sb.mock = None
        worker_out = os.path.join(sb.root, "worker-codex.out")
        spawn = "CODEX_HOME=%s MOCK_API_KEY=mock-key nohup %s exec --skip-git-repo-check -C %s --color never %s " \
                ">%s 2>&1 &" % (q(sb.codex_home()), q(PREREQ["codex"]), q(sb.proj),
                                q("worker: fix the flaky test"), q(worker_out))
        send_out = os.path.join(sb.root, "conductor-send.out")

        def shell(cmd):
            return {"calls": [{"name": "run_shell_command", "args": {"command": cmd}}]}
        conductor = {"turns": [
            shell("%s %s count 1 %s; echo spawned" % (spawn, wait_sh(sb), q(ready))),
            shell("%s; echo sent >%s; %s grep %s %s" % (self.send_cmd(sb, body, send_out), q(flag), wait_sh(sb),
                                                     q("Wrapped up."), q(worker_out))),
            {"text": "The worker was told."}], "overflow": {"text": "Nothing more."}}
        sb.start_mock(conductor, "gemini")
        sb.write_gemini_settings()
        sb.install_hooks("gemini")
        self.wiring = "preloop-hooks install --harness gemini and --harness codex --scope user"
        cond_sid = kit.new_session_id()
        self.run_conductor(sb, "gemini", "Start a worker, then tell it to wrap up.",
                           float(os.environ.get("PRELOOP_E2E_GEMINI_TIMEOUT", "120")) * 2, session_id=cond_sid)
        self.wait_outputs([worker_out], "Wrapped up.")
        kids = [s["external_session_id"] for s in self.sessions(sb) if s.get("agent_kind") == "codex_cli"]
        self.check(len(kids) == 1, "want one Codex session, got %r" % kids)
        notes = self.check_sent(kit.read_text(send_out), kids)
        self.check_lineage(sb, cond_sid, kids)
        reqs = kit.main_requests("codex", wmock.records())
        hits = kit.codex_find_marker(reqs, tok)
        self.check(hits, "the worker never got the note (%d requests): %s"
                   % (len(reqs), kit.summarize_codex_requests(reqs, [tok])))
        self.check(hits[0][0] == 2, "the worker got the note first in request #%d, want #2 (after its next "
                                    "tool call)" % hits[0][0])
        self.check_receipts(notes)

    # ------------------------------------------------------------------ Copilot -> claude -p
    def test_copilot_conductor_steers_a_claude_worker(self):
        sb, tok, body, flag, ready = self.conductor_sandbox(
            "lineage: a Copilot conductor's bash tool starts a claude -p worker", "CP2CC")
        workers, wmock, spawn = self.claude_workers(sb, ("C",), flag, ready)
        send_out = os.path.join(sb.root, "conductor-send.out")

        def bash(cmd, what):
            return {"calls": [{"name": "bash", "arguments": {
                "command": cmd, "description": what, "mode": "sync", "initial_wait": 120}}]}
        conductor = {"turns": [
            bash("%s %s count 1 %s; echo spawned" % (spawn, wait_sh(sb), q(ready)), "start a worker"),
            bash("%s; echo sent >%s; %s grep '\"result\"' %s" % (
                self.send_cmd(sb, body, send_out), q(flag), wait_sh(sb),
                q(os.path.join(sb.root, "worker-C.out"))), "tell it to wrap up"),
            {"text": "The worker was told."}], "overflow": {"text": "Nothing more."}}
        sb.start_mock(conductor, "copilot")
        sb.install_hooks("copilot")
        self.wiring = "preloop-hooks install --harness copilot --scope user; kit.Sandbox.write_settings (worker)"
        cond_sid = kit.new_session_id()
        self.run_conductor(sb, "copilot", "Start a worker, then tell it to wrap up.",
                           float(os.environ.get("PRELOOP_E2E_COPILOT_TIMEOUT", "120")) * 2, session_id=cond_sid)
        self.wait_outputs([os.path.join(sb.root, "worker-C.out")], '"result"')
        self.check(self.session_file(sb, cond_sid).get("agent_kind") == "copilot_cli",
                   "the conductor's session file: %r" % self.session_file(sb, cond_sid))
        notes = self.check_sent(kit.read_text(send_out), workers.values())
        self.check_lineage(sb, cond_sid, list(workers.values()))
        self.check_claude_workers_got_it(wmock, workers, tok)
        self.check_receipts(notes)


class TestLineageLocal(_Lineage, kit.LocalMode, unittest.TestCase):
    pass


class TestLineageServer(_Lineage, kit.ServerMode, unittest.TestCase):
    PREREQS = _Lineage.PREREQS + ("creds",)


if __name__ == "__main__":
    unittest.main()
