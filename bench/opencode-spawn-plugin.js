// Measures our plugin's `ask` inside a real OpenCode process (its Bun, its heap), through
// `Bun.spawn` and through `child_process.spawn`, on the first chat.message; written beside our
// plugin (`plugins/zbench.js`) by bench/opencode-spawn-in-opencode.py, which prints the result.
// Environment: BENCH_EXE (preloop-hooks), BENCH_OUT (result file), BENCH_RUNS.
import plugin from "./preloop.js";
import { spawn as nodeSpawn } from "node:child_process";
import { writeFileSync } from "node:fs";
export default async function zbench() {
	let ran = false;
	return {
		"chat.message": async (input) => {
			if (ran) return;
			ran = true;
			const { ask, bunSpawner } = plugin.internals;
			const exe = process.env.BENCH_EXE;
			const runs = Number(process.env.BENCH_RUNS || 60);
			const payload = { v: 1, event: "tool.execute.after", session_id: input.sessionID, mode: "run", tool_name: "bash", call_id: "c1" };
			const spawners = { "Bun.spawn": bunSpawner(globalThis.Bun), "child_process.spawn": nodeSpawn };
			const cases = [];
			for (const k of ["true", "after"]) for (const s of Object.keys(spawners)) cases.push([k, s]);
			const times = Object.fromEntries(cases.map(([k, s]) => [`${k} ${s}`, []]));
			for (let i = 0; i < runs; i++)
				for (const [k, s] of cases) {
					const h = k === "true" ? { argv: ["/bin/true"], timeout: 10000 } : { argv: [exe, "hook", "preloop-opencode-tool-execute-after"], timeout: 10000 };
					const t0 = process.hrtime.bigint();
					const r = await ask(h, payload, spawners[s]);
					times[`${k} ${s}`].push(Number(process.hrtime.bigint() - t0) / 1e6);
					if (r.error || r.answer) throw new Error(JSON.stringify(r));
				}
			const q = (a, p) => a[Math.min(a.length - 1, Math.floor(p * a.length))];
			const lines = [`runs ${runs}; bun ${Bun.version}; rss ${Math.round(process.memoryUsage().rss / 1e6)} MB`];
			for (const k of Object.keys(times)) {
				const a = times[k].sort((x, y) => x - y);
				lines.push(`${k} | ${q(a, 0.5).toFixed(2)} | ${q(a, 0.9).toFixed(2)} | ${a[0].toFixed(2)}`);
			}
			writeFileSync(process.env.BENCH_OUT, lines.join("\n") + "\n");
		},
	};
}
