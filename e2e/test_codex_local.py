"""End-to-end, LOCAL mode, Codex: the real Codex CLI 0.169.0 headless (`codex exec`)
against mock_openai.py (the project's mock of the OpenAI Responses API), with the
project's Codex hooks wired into a temporary HOME / CODEX_HOME by
`preloop-hooks install --harness codex --scope user` (hooks.json + the trust entries in
$CODEX_HOME/config.toml). No PRELOOP_URL / PRELOOP_TOKEN anywhere: PRELOOP_HOME is a temp
dir, notes go through the local file inbox (`preloop-hooks notes send`), receipts are
read with `preloop-hooks notes status <id> --json`.

Codex picks its own session id, so a note to "the run" is sent by the mock (a turn's
before_reply_cmd) through with_session.py, which replaces "@@SESSION@@" with the id the
SessionStart hook registered in $PRELOOP_HOME/sessions/*.json.

Scenarios (class TestCodexLocal), each checking what the mock model received and the
local receipt:
  a  `notes send --next codex` before the run starts -> request #0, a developer message
     (SessionStart additionalContext) before the user prompt, once; receipt delivered /
     session_start, bound to the run's session
  b  note to the run (--session <id>) while the mock answers request #0 with a shell call
     -> request #1, a developer message between the function_call and its output
     (PreToolUse); receipt delivered / pre_tool_use
  c  note to the run while the mock answers the final text-only turn -> Stop rescue: one
     extra request ending with a user <hook_prompt hook_run_id="stop:..."> message
     (Codex HTML-escapes it); receipt delivered / stop
  d  as c, then a second note during the rescue turn (the next Stop has
     stop_hook_active=true: no second rescue) -> in no request; receipt undeliverable /
     session_ended (local SessionEnd)
  e  `codex exec --approve-for-me` + an escalated call: PermissionRequest fires, our hook
     prints no decision in local mode (Codex's own flow decides: the mock's guardian is
     asked and allows, the command runs)

Run from the repository root:
  python3 -m unittest -v e2e/test_codex_local.py
"""

import json
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kit  # noqa: E402

PREREQ = kit.Prereq()


def setUpModule():
    PREREQ.get("bin_dir", lambda: kit.build_binaries(kit.CODEX_HOOK_BINARIES))
    PREREQ.get("install", lambda: kit.require_install(PREREQ["bin_dir"], "codex"))
    PREREQ.get("codex", kit.ensure_codex)


class TestCodexLocal(kit.CodexScenarios, kit.LocalMode, unittest.TestCase):
    """Codex 0.169.0 `codex exec`, hooks installed by `preloop-hooks install --harness
    codex --scope user`, local mode: scenarios a-d (kit.CodexScenarios) and e."""

    PREREQ = PREREQ
    PREREQS = ("bin_dir", "install", "codex")
    TOKEN_PREFIX = "E2E-CXL"

    def test_e_permission_request_local_mode_prints_no_decision(self):
        # `codex exec --approve-for-me` + an escalated exec_command is the one exec setup
        # that fires PermissionRequest (docs/contracts/codex.md §5). Our hook prints
        # nothing in local mode, so Codex's own flow decides: with no hook decision it asks
        # its automatic reviewer (a "guardian" /v1/responses request; the mock allows).
        # A hook allow would have skipped the guardian; a deny would have blocked the command.
        self.start("e: PermissionRequest in local mode (no decision, Codex's flow decides)")
        run = self.run_codex({
            "agents": [{"name": "main", "turns": [
                {"calls": [{"cmd": "touch escalated_file", "sandbox_permissions": "require_escalated",
                            "justification": "need to write"}]},
                {"text": "All done."}], "overflow": {"text": "Nothing more."}}],
            "guardian": {"outcome": "allow", "rationale": "MOCK-GUARDIAN allow (e2e local)"}},
            prompt="make the file", approve_for_me=True)
        status = [l for l in run.stderr.splitlines() if l.startswith("hook: PermissionRequest")]
        self.extra.append("PermissionRequest status lines: %s" % status)
        self.check("hook: PermissionRequest" in status,
                   "PermissionRequest never fired (no `hook: PermissionRequest` line): is "
                   "--approve-for-me + require_escalated still the trigger?")
        self.check("hook: PermissionRequest Completed" in status and not any(
                   l.endswith(("Blocked", "Failed")) for l in status),
                   "want `hook: PermissionRequest Completed` (no decision, not Blocked or Failed)")
        guardian = [r for r in run.records if r.get("route") == "responses"
                    and r.get("reply", {}).get("kind") == "guardian"]
        self.check(guardian, "Codex never asked its guardian: the hook must have decided (allow)")
        self.check(os.path.exists(os.path.join(self.sb.proj, "escalated_file")),
                   "the escalated command did not run (no escalated_file): denied?")
        self.check(len(run.requests) == 2, "%d model requests, want 2" % len(run.requests))
        hook_log = [l for l in self.sb.preloop_log_lines(200) if " PermissionRequest " in l]
        self.check(hook_log and all("mode=local" in l for l in hook_log),
                   "no `codex PermissionRequest mode=local ...` line in PRELOOP_HOME/log: %s" % hook_log)
        self.extra.append("hook log: %s" % hook_log)
        # Direct evidence as well: the PermissionRequest command hooks.json wires, fed the
        # captured 0.169.0 payload with this run's session id and cwd, prints nothing.
        with open(os.path.join(self.sb.codex_home(), "hooks.json")) as f:
            cmd = json.load(f)["hooks"]["PermissionRequest"][0]["hooks"][0]["command"]
        with open(os.path.join(kit.REPO_ROOT, "fixtures", "codex-0.169.0", "PermissionRequest.json")) as f:
            payload = json.load(f)
        payload.update(session_id=run.session_id, cwd=self.sb.proj)
        p = subprocess.run(cmd, shell=True, input=json.dumps(payload), capture_output=True, text=True,
                           env=self.sb.codex_env(), cwd=self.sb.proj, timeout=30)
        self.extra.append("replayed PermissionRequest (%s): rc=%s stdout=%r stderr=%r"
                          % (cmd, p.returncode, p.stdout, kit.shorten(p.stderr, 300)))
        self.check(p.returncode == 0 and p.stdout == "",
                   "the PermissionRequest hook printed something in local mode (want nothing, exit 0)")


if __name__ == "__main__":
    unittest.main()
