// What one OpenCode hook costs through our plugin, measured in OpenCode's own Bun runtime as the
// plugin runs it (`ask` of the OpenCode plugin, hooks/opencode/shim/source.js: an async spawn, the payload line, the
// answer line), through `Bun.spawn` (what the plugin uses inside OpenCode) and through
// `child_process.spawn` (what it used before, and uses under Node):
//
//   BUN_BE_BUN=1 <opencode binary> bench/opencode-spawn.mjs <dir of the release preloop-hooks> [runs]
//
// (`BUN_BE_BUN=1` makes OpenCode's single-file binary run a script as the Bun it embeds.)
//
//   true           /bin/true with the payload: the spawn alone, no hook
//   before         preloop-hooks hook preloop-opencode-tool-execute-before, local mode, nothing pending
//   after          preloop-hooks hook preloop-opencode-tool-execute-after, local mode, nothing pending
//
// Prints median, p90 and min in ms for each (runs interleaved, a fresh PRELOOP_HOME).
import { spawn as nodeSpawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadShim } from "../shared/plugin/assemble.mjs";

const { default: plugin } = await loadShim("opencode");

const { ask, bunSpawner } = plugin.internals;
if (!globalThis.Bun) {
	console.error("run under Bun: BUN_BE_BUN=1 <opencode binary> bench/opencode-spawn.mjs <dir> [runs]");
	process.exit(2);
}
const [dir, runsArg] = process.argv.slice(2);
if (!dir) {
	console.error("usage: BUN_BE_BUN=1 <opencode binary> bench/opencode-spawn.mjs <dir of the release preloop-hooks> [runs]");
	process.exit(2);
}
const runs = Number(runsArg) || 100;
const exe = join(dir, "preloop-hooks");
const home = mkdtempSync(join(tmpdir(), "preloop-opencode-bench-"));
process.env.PRELOOP_HOME = join(home, ".preloop");
process.env.HOME = home;
for (const k of ["PRELOOP_URL", "PRELOOP_TOKEN"]) delete process.env[k];
const sid = "ses_dc0f1327dffehIInU0Fzi1o4KZ";
const base = { v: 1, session_id: sid, mode: "serve", cwd: home };
const hook = (name) => ({ argv: [exe, "hook", name], timeout: 10000 });
const payloads = {
	before: { ...base, event: "tool.execute.before", tool_name: "bash", call_id: "c1", tool_input: { command: "echo one" } },
	after: { ...base, event: "tool.execute.after", tool_name: "bash", call_id: "c1" },
};
const spawners = { "Bun.spawn": bunSpawner(globalThis.Bun), "child_process.spawn": nodeSpawn };

// Register the session once (the first hook of a session registers it).
await ask(hook("preloop-opencode-chat-message"), { ...base, event: "chat.message", prompt: "hi" }, nodeSpawn);

const ms = (t0) => Number(process.hrtime.bigint() - t0) / 1e6;
async function one(kind, spawn) {
	const t0 = process.hrtime.bigint();
	const h = kind === "true" ? { argv: ["/bin/true"], timeout: 10000 } : hook(`preloop-opencode-tool-execute-${kind}`);
	const r = await ask(h, payloads[kind === "true" ? "after" : kind], spawn);
	if (r.error || r.answer) throw new Error(`${kind}: ${JSON.stringify(r)}`);
	return ms(t0);
}

const cases = [];
for (const kind of ["true", "before", "after"]) for (const s of Object.keys(spawners)) cases.push([kind, s]);
const times = Object.fromEntries(cases.map(([k, s]) => [`${k} ${s}`, []]));
for (let i = 0; i < runs; i++) for (const [k, s] of cases) times[`${k} ${s}`].push(await one(k, spawners[s]));
const q = (a, p) => a[Math.min(a.length - 1, Math.floor(p * a.length))];
console.log(`runs ${runs} each, interleaved; bun ${globalThis.Bun.version}`);
console.log("what | median ms | p90 ms | min ms");
for (const k of Object.keys(times)) {
	const a = times[k].sort((x, y) => x - y);
	console.log(`${k} | ${q(a, 0.5).toFixed(2)} | ${q(a, 0.9).toFixed(2)} | ${a[0].toFixed(2)}`);
}
