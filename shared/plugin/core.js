// The core every plugin shim of ours shares (Pi's extension, OpenCode's plugin): the manifest
// read, the log line, and the one hook run of the protocol (preloop_shared::plugin: our payload
// as one line on stdin, one answer line back, `applied` on stdin once the harness has the note).
// Not a module of its own: `cargo test -p preloop-shared plugin` checks that each shim,
// hooks/<harness>/shim/preloop.js, is its source.js with this file where the source says
// `// @@PRELOOP_CORE@@` (PRELOOP_BLESS=1 writes it). The shim defines `HARNESS` (its log's
// name), `ANSWER_KINDS` (the answers it applies) and `defaultSpawn()` (the spawner `ask` uses
// unless given one), and imports
// `readFileSync`, `appendFileSync`, `mkdirSync`, `renameSync`, `statSync` (node:fs) and `dirname`
// (node:path).

/** Lets the host process exit while `child` (an idle watcher) still runs: neither the child
 * nor its pipes keep the host's event loop alive. */
function unrefChild(child) {
	for (const h of [child, child.stdin, child.stdout]) {
		try {
			h.unref();
		} catch {}
	}
}

/** The manifest beside the shim: `{version, on_error, log, hooks: {event: [{argv, timeout}]}, ...}`. */
function readManifest(path, read = readFileSync) {
	try {
		const m = JSON.parse(read(path, "utf8"));
		if (!m || typeof m !== "object" || !m.hooks || typeof m.hooks !== "object") throw new Error("no hooks");
		return { manifest: m };
	} catch (e) {
		return { manifest: null, error: `manifest ${path}: ${e && e.message}` };
	}
}

/** One line in the shim's log (rotated at 1 MiB); never throws. */
function logLine(file, event, text, fs = { appendFileSync, mkdirSync, renameSync, statSync }) {
	if (!file) return;
	try {
		// The log's folder may not exist yet: no hook ran before this line.
		fs.mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
		try {
			if (fs.statSync(file).size > LOG_MAX) fs.renameSync(file, file + ".1");
		} catch {}
		const clean = String(text).replace(/[\u0000-\u001f\u007f]/g, " ").slice(0, 400);
		fs.appendFileSync(file, `${new Date().toISOString()} ${HARNESS} ${event} shim ${clean}\n`, { mode: 0o600 });
	} catch {}
}

/**
 * Run one hook: payload line in, answer line out (`started` gets the child). Resolves
 * `{answer, confirm}` (answer null: the hook had nothing to say) or `{error}`. `confirm(true)`
 * writes `applied` and closes the hook's stdin; `confirm(false)` closes it without (the hook then
 * keeps its notes).
 */
function ask(hook, payload, spawn = defaultSpawn(), started = () => {}) {
	return new Promise((resolve) => {
		let done = false;
		let out = "";
		let child;
		let timer;
		const finish = (r) => {
			if (done) return;
			done = true;
			clearTimeout(timer);
			if (!r.answer && child) {
				try {
					child.stdin.end();
				} catch {}
			}
			resolve(r);
		};
		const argv = hook && Array.isArray(hook.argv) ? hook.argv : [];
		if (!argv.length || argv.some((a) => typeof a !== "string")) return finish({ error: "no command in the manifest" });
		try {
			child = spawn(argv[0], argv.slice(1), { stdio: ["pipe", "pipe", "ignore"] });
			started(child);
		} catch (e) {
			return finish({ error: `cannot run ${argv[0]}: ${e && (e.code || e.message)}` });
		}
		const ms = Number.isFinite(hook.timeout) && hook.timeout > 0 ? hook.timeout : 10000;
		timer = setTimeout(() => {
			try {
				child.kill("SIGKILL");
			} catch {}
			finish({ error: `no answer within ${ms} ms` });
		}, ms);
		child.on("error", (e) => finish({ error: `cannot run ${argv[0]}: ${e && (e.code || e.message)}` }));
		child.stdin.on("error", () => {});
		child.stdout.on("data", (d) => {
			out += d;
			const i = out.indexOf("\n");
			if (i < 0) return;
			let answer;
			try {
				answer = JSON.parse(out.slice(0, i));
			} catch {
				return finish({ error: "an answer that is not JSON" });
			}
			if (!answer || typeof answer !== "object" || !ANSWER_KINDS.includes(answer.kind)) {
				return finish({ error: `an answer this shim does not know: ${out.slice(0, i).slice(0, 120)}` });
			}
			const confirm = (applied) => {
				try {
					child.stdin.end(applied ? "applied\n" : undefined);
				} catch {}
			};
			finish({ answer, confirm });
		});
		child.on("close", (code, signal) => {
			if (out.trim()) finish({ error: "an answer without its newline" });
			else if (code === 0) finish({ answer: null });
			else if (signal) finish({ error: `stopped by ${signal} with no answer` });
			else finish({ error: `exit ${code} with no answer` });
		});
		try {
			child.stdin.write(JSON.stringify(payload) + "\n");
		} catch {}
	});
}
