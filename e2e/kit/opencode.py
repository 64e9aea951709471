"""OpenCode: what the kit needs of its CLI beyond the registry (kit.ensure("opencode")). The
package's optional dependency opencode-linux-x64 carries the native binary; npm may skip
the postinstall, which is not needed (docs/contracts/opencode.md §1). Its e2e world is
e2e/test_opencode.py's OpenCodeWorld (kit.PluginWorld)."""

import os

from .common import BASE_PATH
from .harnesses import harness_dir

__all__ = []


def cli_env():
    """The environment of `opencode --version` (kit.ensure): a HOME of its own, no
    auto-update."""
    return {"PATH": BASE_PATH, "HOME": os.path.join(harness_dir(), "opencode-home"),
            "LANG": "C.UTF-8", "OPENCODE_DISABLE_AUTOUPDATE": "1"}
