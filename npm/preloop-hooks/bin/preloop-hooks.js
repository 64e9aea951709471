#!/usr/bin/env node
// The `preloop-hooks` command of the npm package: finds the native
// executable of this platform (the optional dependency
// preloop-hooks-<platform>-<arch>, or a package of that name installed beside
// this one) and runs it with the same arguments, stdio and exit status.
//
// Only the operator CLI goes through Node. `preloop-hooks install` copies
// the native executable to $PRELOOP_HOME/bin (default ~/.preloop/bin) and
// writes that absolute path into the harness configs, so a hook costs one
// native process start, never a Node start, and an `npm update` or
// `npm uninstall` never pulls a hook out from under a running agent.
"use strict";

const { spawnSync } = require("child_process");
const fs = require("fs");
const path = require("path");

const PLATFORMS = {
  "linux x64": "preloop-hooks-linux-x64",
};

function fail(message) {
  process.stderr.write(`preloop-hooks: ${message}\n`);
  process.exit(1);
}

function nativeExecutable() {
  const override = process.env.PRELOOP_HOOKS_BINARY;
  if (override) {
    return override;
  }
  const key = `${process.platform} ${process.arch}`;
  const pkg = PLATFORMS[key];
  if (!pkg) {
    fail(
      `no prebuilt executable for ${key} (prebuilt: ${Object.keys(PLATFORMS).join(", ")}); ` +
        "build it from source: cargo install --path install (see the README)"
    );
  }
  try {
    return require.resolve(`${pkg}/bin/preloop-hooks`);
  } catch (_) {
    // Installed side by side (`npm install -g` of both tarballs).
    const sibling = path.join(__dirname, "..", "..", pkg, "bin", "preloop-hooks");
    if (fs.existsSync(sibling)) {
      return sibling;
    }
  }
  fail(
    `the native package ${pkg} is not installed (npm skips optional dependencies with --no-optional ` +
      `or --omit=optional): npm install -g ${pkg}`
  );
}

const exe = nativeExecutable();
// The executable handles the terminal's signals itself (Ctrl-C while
// `notes send --wait` waits, attach's raw mode): Node must not die of them
// first and leave the terminal to a child it no longer waits for.
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT"]) {
  process.on(signal, () => {});
}
const result = spawnSync(exe, process.argv.slice(2), { stdio: "inherit" });
if (result.error) {
  fail(`cannot run ${exe}: ${result.error.message}`);
}
if (result.signal) {
  process.removeAllListeners(result.signal);
  process.kill(process.pid, result.signal);
}
process.exit(result.status === null ? 1 : result.status);
