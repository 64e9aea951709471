"""Pi: what the kit needs of its CLI beyond the registry (kit.ensure("pi")). Its e2e world
is e2e/test_pi.py's PiWorld (kit.PluginWorld); docs/contracts/pi.md."""

import os

from .common import BASE_PATH
from .harnesses import harness_dir

__all__ = []


def cli_env():
    """The environment of `pi --version` (kit.ensure): a HOME of its own, offline, no
    telemetry."""
    return {"PATH": BASE_PATH, "HOME": os.path.join(harness_dir(), "pi-home"), "PI_OFFLINE": "1",
            "PI_TELEMETRY": "0", "LANG": "C.UTF-8"}
