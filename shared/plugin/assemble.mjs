// A shim as its harness gets it, for what loads one under Node (the shims' tests, the spawn
// benchmarks): hooks/<harness>/shim/source.js with the core every shim shares (core.js, beside
// this file) where the source says `// @@PRELOOP_CORE@@`, as preloop_shared::plugin::Shim
// assembles it in Rust (there also stamped with the build's version), written to a temporary
// `preloop.mjs` and imported from there.
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const HERE = dirname(fileURLToPath(import.meta.url));
const MARKER = "// @@PRELOOP_CORE@@\n";

/** The shim's text: `harness`'s source.js with the core in place of its one marker line. */
export function shimText(harness) {
	const source = readFileSync(join(HERE, "..", "..", "hooks", harness, "shim", "source.js"), "utf8");
	const core = readFileSync(join(HERE, "core.js"), "utf8");
	if (source.split(MARKER).length !== 2) throw new Error(`hooks/${harness}/shim/source.js: not one core marker`);
	return source.replace(MARKER, () => core);
}

/** The shim of `harness`, imported as a module (a fresh file, so a fresh module, per call). */
export async function loadShim(harness) {
	const dir = mkdtempSync(join(tmpdir(), `preloop-${harness}-shim-`));
	const file = join(dir, "preloop.mjs");
	writeFileSync(file, shimText(harness));
	return import(pathToFileURL(file).href);
}
