"""The scenario suites' TestCase mixins. A scenario TestCase is

    class T(<Harness>Scenarios, <Mode>, unittest.TestCase)

(the mode mixins derive from Scenario, so both override its defaults):

  Harness: ClaudeScenarios | CodexScenarios | GeminiScenarios | CopilotScenarios
           (claude.py, codex.py, gemini.py, copilot.py; the last two on PromptScenarios,
           prompt.py) -- how the harness is wired and run, where a note lands, on
           NoteScenarios (notes.py), the scenarios a-d every mode shares
  Mode:    LocalMode (local inbox, `preloop-hooks notes ...`) | ServerMode (the real
           Preloop server: PREREQ "creds" and "server") (modes.py) -- how a note is sent
           and its receipt read, what binds it to the run

Scenario (base.py) holds the rest: state, check(), the failure dump, receipts, blocks."""
