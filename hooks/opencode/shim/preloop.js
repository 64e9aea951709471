// preloop-hooks OpenCode plugin @@PRELOOP_VERSION@@. Written by `preloop-hooks install --harness opencode`
// from hooks/opencode/shim/preloop.js; do not edit (`preloop-hooks doctor` compares it byte for byte).
//
// A shim, nothing more: on each OpenCode hook it runs the hook command our manifest `preloop.json`
// (beside this file) names, `preloop-hooks hook preloop-opencode-<event>`, with one line of JSON on
// stdin, reads one line of JSON back and applies it: context for the model, a deny with its reason,
// or a continuation. Then it writes `applied` on the hook's stdin, and only then does the hook ack
// the notes `delivered` (hooks/opencode/README.md). Every decision is the hook's; the one brake kept
// here too is the cap on continuations (OpenCode has none). No dependencies (OpenCode installs
// nothing for it); a failure here is logged in one line and never stops OpenCode. The default export
// is the only export: OpenCode calls every exported value as a plugin.
import { spawn as nodeSpawn } from "node:child_process";
import { appendFileSync, mkdirSync, readFileSync, renameSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const VERSION = "@@PRELOOP_VERSION@@";
const PROTOCOL = 1;
const LOG_MAX = 1 << 20;
const GUARD = Symbol.for("preloop-hooks.opencode-plugin");
const B62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/** The manifest: `{version, on_error, stop_rescue_cap, log, hooks: {event: [{argv, timeout}]}}`. */
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
		fs.mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
		try {
			if (fs.statSync(file).size > LOG_MAX) fs.renameSync(file, file + ".1");
		} catch {}
		const clean = String(text).replace(/[\u0000-\u001f\u007f]/g, " ").slice(0, 400);
		fs.appendFileSync(file, `${new Date().toISOString()} opencode ${event} shim ${clean}\n`, { mode: 0o600 });
	} catch {}
}

/**
 * Run one hook: payload line in, answer line out. Resolves `{answer, confirm}` (answer null: the
 * hook had nothing to say) or `{error}`. `confirm(true)` writes `applied` and closes the hook's
 * stdin; `confirm(false)` closes it without (the hook then keeps its notes).
 */
function ask(hook, payload, spawn = nodeSpawn) {
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
			if (!answer || typeof answer !== "object" || !["context", "deny", "continue"].includes(answer.kind)) {
				return finish({ error: `an answer this shim does not know: ${out.slice(0, i).slice(0, 120)}` });
			}
			const confirm = (applied) => {
				try {
					child.stdin.end(applied ? "applied\n" : undefined);
				} catch {}
			};
			finish({ answer, confirm });
		});
		child.on("close", (code) => {
			if (out.trim()) finish({ error: "an answer without its newline" });
			else if (code === 0) finish({ answer: null });
			else finish({ error: `exit ${code} with no answer` });
		});
		try {
			child.stdin.write(JSON.stringify(payload) + "\n");
		} catch {}
	});
}

/** `run`, `serve`, or `tui` (no subcommand), from OpenCode's argv (`bun <script> run ...`). */
function modeOf(argv = process.argv) {
	const sub = Array.isArray(argv) ? argv[2] : undefined;
	if (!sub || String(sub).startsWith("-")) return "tui";
	return String(sub);
}

/**
 * A part id that sorts right after `prev` (OpenCode sends a message's parts ordered by id:
 * `prt_` + 12 hex of a counter + 14 base62 characters).
 */
function partIdAfter(prev, now = Date.now()) {
	const m = /^prt_([0-9a-f]{12})/.exec(String(prev || ""));
	const n = m ? (BigInt("0x" + m[1]) + 1n) & 0xffffffffffffn : (BigInt(now) * 4096n) & 0xffffffffffffn;
	let tail = "";
	for (let i = 0; i < 14; i++) tail += B62[Math.floor(Math.random() * 62)];
	return "prt_" + n.toString(16).padStart(12, "0") + tail;
}

/** The plugin over a manifest (`load` returns `{manifest, error}`), a spawner and argv: tests give fakes. */
function createPlugin({ load, spawn = nodeSpawn, fs, argv = process.argv } = {}) {
	return async function preloop(ctx) {
		if (globalThis[GUARD]) {
			// OpenCode loads a global and a project copy both (no de-duplication of plugin files).
			logLine(globalThis[GUARD].log, "load", `a second copy was not loaded (${VERSION})`, fs);
			return {};
		}
		const { manifest, error } = load();
		const log = manifest && typeof manifest.log === "string" ? manifest.log : null;
		globalThis[GUARD] = { log };
		if (!manifest) {
			// No manifest, no command: tool calls follow the documented default (open), logged.
			logLine(log, "load", `${error}; nothing runs (run preloop-hooks install --harness opencode)`, fs);
			return {};
		}
		const denyOnError = manifest.on_error && manifest.on_error["tool.execute.before"] === "deny";
		const cap = Number.isInteger(manifest.stop_rescue_cap) && manifest.stop_rescue_cap >= 0 ? manifest.stop_rescue_cap : 3;
		const mode = modeOf(argv);
		const client = ctx && ctx.client;
		const cwd = ctx && ctx.directory ? String(ctx.directory) : null;
		/** Per session: continued (our continuation since the last prompt), rescues, our own texts. */
		const sessions = new Map();
		const sess = (id) => {
			let s = sessions.get(id);
			if (!s) {
				s = { continued: false, rescues: 0, mine: new Set(), last: {} };
				sessions.set(id, s);
			}
			return s;
		};

		async function run(event, sessionID, fields) {
			const payload = { v: PROTOCOL, event, session_id: String(sessionID || ""), mode, ...fields };
			if (cwd) payload.cwd = cwd;
			const hooks = manifest.hooks[event];
			const r = await ask(Array.isArray(hooks) ? hooks[0] : undefined, payload, spawn);
			if (r.error) logLine(log, event, r.error, fs);
			return r;
		}
		/** Apply a context or continuation answer with `hand`; confirm only if it went to OpenCode. */
		async function apply(r, event, kind, hand) {
			if (!r.answer) return false;
			if (r.answer.kind !== kind || typeof r.answer.text !== "string" || !r.answer.text) {
				logLine(log, event, `a ${r.answer.kind} answer where ${kind} was due`, fs);
				r.confirm(false);
				return false;
			}
			try {
				await hand(r.answer.text);
			} catch (e) {
				logLine(log, event, `OpenCode refused the note: ${e && e.message}`, fs);
				r.confirm(false);
				return false;
			}
			r.confirm(true);
			return true;
		}
		async function end(sessionID, reason) {
			sessions.delete(sessionID);
			const r = await run("dispose", sessionID, { reason });
			if (r.answer) r.confirm(false);
		}

		return {
			event: async ({ event } = {}) => {
				const props = (event && event.properties) || {};
				if (event && event.type === "session.created") {
					const id = (props.info && props.info.id) || props.sessionID;
					if (!id) return;
					sess(id);
					const r = await run("session.created", id, {});
					if (r.answer) r.confirm(false);
				} else if (event && event.type === "session.deleted") {
					const id = (props.info && props.info.id) || props.sessionID;
					if (id && sessions.has(id)) await end(id, "deleted");
				}
			},
			"chat.message": async (input = {}, output = {}) => {
				const id = input.sessionID;
				const s = sess(id);
				const parts = Array.isArray(output.parts) ? output.parts : [];
				const texts = parts.filter((p) => p && p.type === "text" && typeof p.text === "string").map((p) => p.text);
				const prompt = texts.join("\n");
				// Our own continuation, sent from text.complete: not a prompt.
				if (s.mine.has(prompt)) return;
				s.continued = false;
				const msg = output.message || {};
				if (msg.agent || msg.model) s.last = { agent: msg.agent, model: msg.model };
				const messageID = msg.id || input.messageID || (parts[0] && parts[0].messageID);
				const r = await run("chat.message", id, { prompt, message_id: messageID ? String(messageID) : undefined });
				await apply(r, "chat.message", "context", (text) => {
					if (!messageID || !Array.isArray(output.parts)) throw new Error("no message to add a part to");
					const prev = parts.length ? parts[parts.length - 1].id : null;
					output.parts.push({ id: partIdAfter(prev), sessionID: id, messageID, type: "text", text });
				});
			},
			"tool.execute.before": async (input = {}, output = {}) => {
				const r = await run("tool.execute.before", input.sessionID, {
					tool_name: String(input.tool || ""),
					call_id: input.callID ? String(input.callID) : undefined,
					tool_input: output.args && typeof output.args === "object" ? output.args : {},
				});
				if (r.error) {
					if (!denyOnError) return;
					throw new Error(`Preloop could not check this tool call (${r.error}); pre_tool_use_on_error is deny`);
				}
				if (!r.answer) return;
				if (r.answer.kind !== "deny") {
					logLine(log, "tool.execute.before", `a ${r.answer.kind} answer to a tool call`, fs);
					r.confirm(false);
					return;
				}
				r.confirm(true);
				// OpenCode makes the message the tool's result; the tool does not run.
				throw new Error(String(r.answer.reason || "Blocked by Preloop policy"));
			},
			"tool.execute.after": async (input = {}, output = {}) => {
				const r = await run("tool.execute.after", input.sessionID, {
					tool_name: String(input.tool || ""),
					call_id: input.callID ? String(input.callID) : undefined,
				});
				// Never throw here: OpenCode would replace the tool's result with the error.
				await apply(r, "tool.execute.after", "context", (text) => {
					if (typeof output.output !== "string") throw new Error("no tool output to append to");
					output.output += "\n\n" + text;
				});
			},
			"experimental.text.complete": async (input = {}) => {
				const id = input.sessionID;
				const s = sess(id);
				const r = await run("experimental.text.complete", id, {
					message_id: input.messageID ? String(input.messageID) : undefined,
					// One continuation per stop, and ours is the only cap OpenCode has.
					stop_hook_active: s.continued || s.rescues >= cap,
				});
				if (r.answer && (s.continued || s.rescues >= cap)) {
					logLine(log, "experimental.text.complete", `a continuation was not sent (one per stop, ${cap} per session)`, fs);
					r.confirm(false);
					return;
				}
				await apply(r, "experimental.text.complete", "continue", async (text) => {
					if (!client || !client.session || typeof client.session.prompt !== "function") throw new Error("no client");
					const body = { noReply: true, ...s.last, parts: [{ type: "text", text }] };
					s.mine.add(text);
					try {
						const res = await client.session.prompt({ path: { id }, body });
						if (res && res.error) throw new Error(`session.prompt: ${JSON.stringify(res.error).slice(0, 200)}`);
					} finally {
						s.mine.delete(text);
					}
					s.continued = true;
					s.rescues += 1;
				});
			},
			dispose: async () => {
				for (const id of [...sessions.keys()]) await end(id, "dispose");
			},
		};
	};
}

/** `preloop.json` beside this file. */
function manifestPath(url = import.meta.url) {
	return join(dirname(fileURLToPath(url)), "preloop.json");
}

export default async function preloop(ctx) {
	try {
		return await createPlugin({ load: () => readManifest(manifestPath()) })(ctx);
	} catch {
		// Never fatal to OpenCode.
		return {};
	}
}
// For the unit tests (properties of the one export; OpenCode calls every exported value).
preloop.internals = { VERSION, PROTOCOL, GUARD, readManifest, logLine, ask, modeOf, partIdAfter, createPlugin, manifestPath };
