// What one Pi event costs through our extension, measured from Node as the extension runs it
// (`ask` of the Pi extension, hooks/pi/shim/source.js: an async spawn, the payload line, the answer line):
//
//   node bench/pi-spawn.mjs <dir of the release preloop-hooks> [runs]
//
//   true         /bin/true with the payload: Node's spawn per event, no hook at all
//   tool_call    preloop-hooks hook preloop-pi-tool-call, local mode, nothing pending
//   tool_result  preloop-hooks hook preloop-pi-tool-result, local mode, nothing pending
//   tool_result+note  the same with one note pending (a session of its own): answer, `applied`
//                (the ack follows after the answer was applied, outside the time)
//   hook alone   the tool_result hook run directly (spawnSync from Node, stdin closed after
//                the payload): the hook's own process, start to exit
//
// Prints median, p90 and min in ms for each (runs interleaved, a fresh PRELOOP_HOME).
import { spawnSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadShim } from "../shared/plugin/assemble.mjs";

const { ask } = await loadShim("pi");

const [dir, runsArg] = process.argv.slice(2);
if (!dir) {
	console.error("usage: node bench/pi-spawn.mjs <dir of the release preloop-hooks> [runs]");
	process.exit(2);
}
const runs = Number(runsArg) || 200;
const exe = join(dir, "preloop-hooks");
const home = mkdtempSync(join(tmpdir(), "preloop-pi-bench-"));
process.env.PRELOOP_HOME = join(home, ".preloop");
process.env.HOME = home;
for (const k of ["PRELOOP_URL", "PRELOOP_TOKEN"]) delete process.env[k];
const sid = "01a23f09-32d5-70d3-a97c-a90dc1360fde";
const base = { v: 1, session_id: sid, has_ui: false, cwd: home };
const hook = (name) => ({ argv: [exe, "hook", name], timeout: 10000 });
const payloads = {
	tool_call: { ...base, event: "tool_call", tool_name: "bash", tool_call_id: "c1", tool_input: { command: "echo one" } },
	tool_result: { ...base, event: "tool_result", tool_name: "bash", tool_call_id: "c1" },
};

// Register the session once (the first hook of a session registers it).
await ask(hook("preloop-pi-session-start"), { ...base, event: "session_start", reason: "startup" });

let notes = 0;
const ms = (t0) => Number(process.hrtime.bigint() - t0) / 1e6;
async function one(kind) {
	const t0 = process.hrtime.bigint();
	if (kind === "true") {
		await ask({ argv: ["/bin/true"], timeout: 10000 }, payloads.tool_result);
	} else if (kind === "hook alone") {
		spawnSync(exe, ["hook", "preloop-pi-tool-result"], { input: JSON.stringify(payloads.tool_result) + "\n" });
	} else if (kind === "tool_result+note") {
		// A session of its own per note (at most 20 notes an hour go to one session).
		const own = { ...payloads.tool_result, session_id: `${sid}-${++notes}` };
		await ask(hook("preloop-pi-session-start"), { ...own, event: "session_start", reason: "startup" });
		const sent = spawnSync(exe, ["notes", "send", "--session", own.session_id, "bench note"], { encoding: "utf8" });
		if (sent.status !== 0) throw new Error(`notes send: ${sent.stderr}`);
		const t1 = process.hrtime.bigint();
		const r = await ask(hook("preloop-pi-tool-result"), own);
		if (!r.answer) throw new Error("no note came back: " + JSON.stringify(r));
		r.confirm(true);
		return ms(t1);
	} else {
		const r = await ask(hook(`preloop-pi-${kind.replace("_", "-")}`), payloads[kind]);
		if (r.error || r.answer) throw new Error(`${kind}: ${JSON.stringify(r)}`);
	}
	return ms(t0);
}

const kinds = ["true", "tool_call", "tool_result", "tool_result+note", "hook alone"];
const times = Object.fromEntries(kinds.map((k) => [k, []]));
for (let i = 0; i < runs; i++) for (const k of kinds) times[k].push(await one(k));
const q = (a, p) => a[Math.min(a.length - 1, Math.floor(p * a.length))];
console.log(`runs ${runs} each, interleaved; node ${process.version}`);
console.log("what | median ms | p90 ms | min ms");
for (const k of kinds) {
	const a = times[k].sort((x, y) => x - y);
	console.log(`${k} | ${q(a, 0.5).toFixed(2)} | ${q(a, 0.9).toFixed(2)} | ${a[0].toFixed(2)}`);
}
