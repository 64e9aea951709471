"""Helpers for the preloop-hooks end-to-end suites (Python 3.11 stdlib only).

The suites run the real harness CLIs headless against the project's mock model APIs, with
hooks wired into a temporary HOME, and inspect what the model received:

  harness                    install            mock                 run              where hook text landed
  Claude Code 2.1.328        ensure_claude()    mock_anthropic.py    run_claude()     find_marker()
  Codex CLI 0.169.0          ensure_codex()     mock_openai.py       run_codex()      codex_find_marker()
  Gemini CLI 0.61.0          ensure_gemini()    mock_gemini.py       run_gemini()     gemini_find_marker()
  Copilot CLI 1.0.102        ensure_copilot()   mock_copilot.py      run_copilot()    copilot_find_marker()
  Pi 0.73.1                  ensure_pi()        mock_pi.py           (e2e/test_pi.py: PiWorld)
  OpenCode 1.18.33           ensure_opencode()  mock_copilot.py      (e2e/test_opencode.py: OpenCodeWorld)

A test makes a Sandbox (temp HOME, project dir, PRELOOP_HOME), starts the mock with a
script of turns (sb.start_mock(script, api)), wires the hooks (write_settings /
install_hooks / write_gemini_hooks / write_copilot_hooks), runs the harness (a RunResult:
rc, stdout, stderr, every mock record, the main agent's request bodies) and looks the
markers up. Scenario suites mix in Scenario (failure dumps, receipts, note helpers) with a
mode (LocalMode / ServerMode) and a harness (ClaudeScenarios / CodexScenarios /
GeminiScenarios / CopilotScenarios on NoteScenarios, which hold the scenarios a-d every mode
shares). A missing prerequisite (harness, binaries, server) makes every test that needs it
FAIL with the reason (Prereq), never skip.

The package, bottom up (each module imports only those above it; the suites use the names
re-exported here, `kit.Sandbox`, never the modules):

  common.py      paths, command names, KitError, shorten/poll_state/quote_path/...
  harnesses.py   the pinned harness CLIs: ensure_<harness>()
  mock.py        the mock model APIs as child processes; main_requests()
  blocks.py      the operator-notes blocks (XML and Gemini's bracket form), parsed
  landing.py     Landing: where a string landed in a Gemini or Copilot request body
  claude.py      Claude Code: hook commands, labels, find_marker, turns, runner, PtyClaude
  tty.py         Tty: a TUI on a pseudo-terminal (PtyClaude's base; e2e/test_tui.py)
  plugin_world.py  PluginWorld: a plugin-carried harness's world (PiWorld, OpenCodeWorld)
  codex.py, gemini.py, copilot.py
                 each harness: hook commands, marker search, runner (a Sandbox mixin)
  binaries.py    the preloop-hooks build, its hook-command links, the release packages
  prereq.py      Prereq and the setUpModule helpers of the install-wired suites
  report.py      failure dumps: request summaries per harness, the mock's commands
  sandbox.py     Sandbox (one scenario's world) and RunResult
  server.py      the real Preloop server: up/down and ServerClient
  scenarios/     the TestCase mixins: Scenario, the modes, the scenarios a-d, one module
                 per harness

Environment knobs (all optional):
  PRELOOP_E2E_HARNESS_DIR   where the harness CLIs are installed / cached
                            (default: e2e/.harness; npm-installed there when missing;
                            Copilot's ~235 MB unpack cache is <dir>/copilot-cache)
  PRELOOP_BIN_DIR           directory holding the already-built preloop-hooks executable (the
                            hook commands are laid out as links to it in its hook-commands/);
                            when unset the kit runs `cargo build --workspace` in the
                            repository root and uses target/debug
  PRELOOP_PACKAGE_DIR       what scripts/package wrote (test_packages.py); when unset the kit
                            runs scripts/package into a temp dir
  PRELOOP_E2E_CLAUDE_TIMEOUT, PRELOOP_E2E_CODEX_TIMEOUT, PRELOOP_E2E_GEMINI_TIMEOUT,
  PRELOOP_E2E_COPILOT_TIMEOUT  seconds one harness run may take (60, 90, 120, 120)
  PRELOOP_E2E_KEEP=1        keep every run's temp dir (default: only failed runs are kept)
  PRELOOP_E2E_TMPDIR        parent for the temp dirs (default: the system temp dir)
  PRELOOP_E2E_SERVER_HOME, PRELOOP_E2E_SERVER_PORT, PRELOOP_E2E_PG_PORT, PRELOOP_E2E_VENV
                            the real Preloop server of test_real_server.py
                            (e2e/preloop_server/up.sh; see e2e/README.md)
"""

from .common import (BASE_PATH, CLI_BINARY, E2E_DIR, FAKE_HOOK, HOOK_TIMEOUT_S, REPO_ROOT, KitError,
                     fake_hook_command, hook_binaries, new_session_id, poll_state, processes_with,
                     quote_path, read_jsonl, read_text, shorten)
from .harnesses import (CLAUDE_CODE_PACKAGE, CLAUDE_CODE_VERSION, CODEX_PACKAGE, CODEX_VERSION,
                        COPILOT_PACKAGE, COPILOT_VERSION, GEMINI_PACKAGE, GEMINI_VERSION,
                        PI_PACKAGE, PI_VERSION, OPENCODE_PACKAGE, OPENCODE_VERSION, copilot_cache_dir,
                        ensure_claude, ensure_codex, ensure_copilot, ensure_gemini, ensure_opencode,
                        ensure_pi, harness_dir)
from .mock import MOCKS, Mock, agent_requests, main_requests
from .blocks import (BRACKET_BLOCK_RE, BRACKET_ELEMENT_RE, FRAMING_HUMAN, NOTES_BLOCK_RE,
                     NOTE_ELEMENT_RE, bracket_blocks, note_blocks)
from .claude import (DEBUG_HOOK_LINE_RE, DEBUG_NOISE_RE, HOOK_BINARIES, LABEL_PRE_TOOL_USE_BASH,
                     LABEL_RE, LABEL_SESSION_START, LABEL_STOP_BLOCKING_PREFIX, LABEL_STOP_CONTEXT,
                     LABEL_STOP_FEEDBACK, MOCK_API_KEY, MODEL_DEFAULT, MODEL_SONNET_45, STOP_LABELS,
                     SYSTEM_REMINDER_RE, Hit, PtyClaude, bash_turn, find_marker, first_hit,
                     is_stop_label, seed_claude_json, text_turn)
from .codex import CODEX_HOOK_BINARIES, codex_find_marker, codex_segments
from .landing import Landing, first_landing
from .gemini import (GEMINI_HOOK_BINARIES, GEMINI_MODEL, gemini_escaped, gemini_find_marker,
                     gemini_segments)
from .copilot import (COPILOT_CAMEL_EVENTS, COPILOT_DATETIME_RE, COPILOT_HOOK_BINARIES,
                      COPILOT_MODEL, COPILOT_PASCAL_EVENTS, COPILOT_POST_LABEL, copilot_find_marker,
                      copilot_segments)
from .binaries import build_binaries, ensure_packages, has_install_command, npm_install_packages
from .prereq import (PROMPT_CLIS, PROMPT_HOOK_BINARIES, Prereq, fail_setup, prompt_prereqs,
                     require_install)
from .report import (SUMMARIZERS, before_reply_lines, summarize_codex_requests,
                     summarize_copilot_requests, summarize_gemini_requests, summarize_request,
                     summarize_requests)
from .sandbox import RunResult, Sandbox
from .server import (SERVER_DIR, ServerClient, ServerError, ensure_server, release_server,
                     require_server, server_home, server_log_tail, stop_server)
from .scenarios.base import TERMINAL_STATES, Scenario, ScenarioFailure
from .scenarios.modes import LocalMode, ServerMode
from .scenarios.notes import RUN_PROMPT, NoteScenarios
from .scenarios.claude import ClaudeScenarios
from .scenarios.codex import CODEX_PROMPT, CodexScenarios
from .scenarios.prompt import PromptLocalMode, PromptScenarios
from .scenarios.gemini import GeminiScenarios
from .scenarios.copilot import CopilotScenarios

__all__ = ["BASE_PATH", "CLI_BINARY", "E2E_DIR", "FAKE_HOOK", "HOOK_TIMEOUT_S", "REPO_ROOT",
           "KitError", "fake_hook_command", "new_session_id", "poll_state", "processes_with",
           "quote_path", "read_jsonl", "read_text", "shorten", "hook_binaries", "CLAUDE_CODE_PACKAGE", "CLAUDE_CODE_VERSION",
           "CODEX_PACKAGE", "CODEX_VERSION", "COPILOT_PACKAGE", "COPILOT_VERSION", "GEMINI_PACKAGE",
           "GEMINI_VERSION", "copilot_cache_dir", "ensure_claude", "ensure_codex", "ensure_copilot",
           "ensure_gemini", "ensure_pi", "PI_PACKAGE", "PI_VERSION", "ensure_opencode", "OPENCODE_PACKAGE",
           "OPENCODE_VERSION", "harness_dir", "MOCKS", "Mock", "agent_requests", "main_requests",
           "BRACKET_BLOCK_RE", "BRACKET_ELEMENT_RE", "FRAMING_HUMAN", "NOTES_BLOCK_RE",
           "NOTE_ELEMENT_RE", "bracket_blocks", "note_blocks", "DEBUG_HOOK_LINE_RE",
           "DEBUG_NOISE_RE", "HOOK_BINARIES", "LABEL_PRE_TOOL_USE_BASH", "LABEL_RE",
           "LABEL_SESSION_START", "LABEL_STOP_BLOCKING_PREFIX", "LABEL_STOP_CONTEXT",
           "LABEL_STOP_FEEDBACK", "MOCK_API_KEY", "MODEL_DEFAULT", "MODEL_SONNET_45", "STOP_LABELS",
           "SYSTEM_REMINDER_RE", "Hit", "PtyClaude", "bash_turn", "find_marker", "first_hit",
           "is_stop_label", "seed_claude_json", "text_turn", "CODEX_HOOK_BINARIES",
           "codex_find_marker", "codex_segments", "Landing", "first_landing",
           "GEMINI_HOOK_BINARIES", "GEMINI_MODEL", "gemini_escaped", "gemini_find_marker",
           "gemini_segments", "COPILOT_CAMEL_EVENTS", "COPILOT_DATETIME_RE",
           "COPILOT_HOOK_BINARIES", "COPILOT_MODEL", "COPILOT_PASCAL_EVENTS", "COPILOT_POST_LABEL",
           "copilot_find_marker", "copilot_segments", "build_binaries", "ensure_packages",
           "has_install_command", "npm_install_packages", "PROMPT_CLIS", "PROMPT_HOOK_BINARIES",
           "Prereq", "fail_setup", "prompt_prereqs", "require_install", "SUMMARIZERS",
           "before_reply_lines", "summarize_codex_requests", "summarize_copilot_requests",
           "summarize_gemini_requests", "summarize_request", "summarize_requests", "RunResult",
           "Sandbox", "SERVER_DIR", "ServerClient", "ServerError", "ensure_server",
           "release_server", "require_server", "server_home", "server_log_tail", "stop_server",
           "TERMINAL_STATES", "Scenario", "ScenarioFailure", "LocalMode", "ServerMode",
           "RUN_PROMPT", "NoteScenarios", "ClaudeScenarios", "CODEX_PROMPT", "CodexScenarios",
           "PromptLocalMode", "PromptScenarios", "GeminiScenarios", "CopilotScenarios"]
