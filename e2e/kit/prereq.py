"""What a test module needs before its first test (a harness CLI, the built binaries, a
server): Prereq holds it, set up once in setUpModule, and a test that needs what could not be
had FAILS with the reason, never skips. The setUpModule helpers for the install-wired
suites (require_install, prompt_prereqs) live here too; the server's are in server.py."""

import os

from .binaries import build_binaries, has_install_command
from .common import CLI_BINARY, KitError, hook_binaries, log, shorten
from .harnesses import ensure

__all__ = ["Prereq", "fail_setup", "prompt_prereqs", "require_install"]


def fail_setup(msg):
    """Raise KitError(msg): for Prereq.get(name, lambda: cond or fail_setup("why"))."""
    raise KitError(msg)


class Prereq:
    """What a test module needs (a harness CLI, the built binaries, a server), set up once
    in setUpModule with get(); a test that needs something that could not be had FAILS
    with the reason (require()), never skips. The first failure carries the whole error,
    later ones a pointer to it."""

    def __init__(self):
        self.values, self.errors, self.shown = {}, {}, set()

    def get(self, name, fn):
        try:
            self.values[name] = fn()
        except Exception as e:   # noqa: BLE001 -- reported by every test that needs it
            self.values[name] = None
            self.errors[name] = "%s: %s" % (type(e).__name__, e)
            log("PREREQUISITE %s FAILED: every test that needs it fails: %s"
                 % (name, shorten(self.errors[name], 300)))
        return self.values[name]

    def __getitem__(self, name):
        return self.values.get(name)

    def set(self, name, value):
        self.values[name] = value

    def require(self, test, *names):
        for name in names or list(self.errors):
            if name in self.errors:
                if name in self.shown:
                    test.fail("SETUP: prerequisite %r is missing (its error is in the first "
                              "failure of this module)" % name)
                self.shown.add(name)
                test.fail("SETUP: prerequisite %r is missing: %s" % (name, self.errors[name]))
            if name not in self.values:
                test.fail("SETUP: prerequisite %r was never set up (setUpModule did not run?)" % name)


def require_install(bin_dir, harness):
    """setUpModule helper (Prereq.get): the preloop-hooks in bin_dir must wire `harness`
    (`install --harness HARNESS`), the way every e2e suite but Claude Code's wires hooks."""
    cli = os.path.join(bin_dir or "/nonexistent", CLI_BINARY)
    return has_install_command(cli, harness) or fail_setup(
        "`%s install --help` does not offer --harness %s: the e2e suites wire the hooks with it" % (cli, harness))


def prompt_prereqs(prereq, *harnesses):
    """setUpModule helper for PromptScenarios: "bin_dir" (with the harnesses' hook binaries
    built), and for each harness "install_HARNESS" (this preloop-hooks wires it) and HARNESS
    (its CLI)."""
    prereq.get("bin_dir", lambda: build_binaries(
        tuple(b for h in harnesses for b in hook_binaries(h).values())))
    for h in harnesses:
        prereq.get("install_" + h, lambda: require_install(prereq["bin_dir"], h))
        prereq.get(h, lambda: ensure(h))
