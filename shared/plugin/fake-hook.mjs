// A stand-in for `preloop-hooks hook <command>` in the plugin shims' tests (hooks/*/shim/): reads the payload
// line, answers per its mode, and records the payload and the confirmation it got back.
import { appendFileSync } from "node:fs";

const [mode, record] = process.argv.slice(2);
const rec = (v) => appendFileSync(record, JSON.stringify(v) + "\n");
let buf = "";
let answered = false;
process.stdin.setEncoding("utf8");
process.stdin.on("data", (d) => {
	buf += d;
	const i = buf.indexOf("\n");
	if (answered || i < 0) return;
	answered = true;
	rec({ payload: JSON.parse(buf.slice(0, i)) });
	buf = buf.slice(i + 1);
	const out = (v) => process.stdout.write(JSON.stringify(v) + "\n");
	switch (mode) {
		case "context":
			return out({ kind: "context", text: "<operator-notes>NOTE</operator-notes>" });
		case "continue":
			return out({ kind: "continue", text: "<operator-notes>LATE</operator-notes>" });
		case "deny":
			return out({ kind: "deny", reason: "DENIED: policy" });
		case "args":
			return out({ kind: "args", args: { text: "hello child", preloop_caller_session_id: "ses_caller" } });
		case "badargs":
			return out({ kind: "args", args: ["not", "an", "object"] });
		case "badjson":
			return process.stdout.write("{not json\n");
		case "unknown":
			return out({ kind: "unknown_command", command: "preloop-shim-nope" });
		case "nonewline":
			process.stdout.write('{"kind":"deny","reason":"x"}');
			return process.exit(0);
		case "nothing":
			return process.exit(0);
		case "sleep":
			return; // never answers
	}
});
process.stdin.on("end", () => {
	rec({ confirm: buf.trim() });
	process.exit(0);
});
