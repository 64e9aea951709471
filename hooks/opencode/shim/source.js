// preloop-hooks OpenCode plugin @@PRELOOP_VERSION@@. Written by `preloop-hooks install --harness opencode`
// from hooks/opencode/shim/source.js and shared/plugin/core.js; do not edit (`preloop-hooks doctor` compares it byte for byte).
//
// A shim, nothing more: on each OpenCode hook it runs the hook command our manifest `preloop.json`
// (beside this file) names, `preloop-hooks hook preloop-opencode-<event>`, with one line of JSON on
// stdin, reads one line of JSON back and applies it: context for the model, a deny with its reason,
// or a continuation. Then it writes `applied` on the hook's stdin, and only then does the hook ack
// the notes `delivered` (hooks/opencode/README.md). Every decision is the hook's; the one brake kept
// here too is the cap on continuations (OpenCode has none). While a session sits idle where OpenCode
// stays alive (`serve`, the TUI; never `run`) one more child, the idle watcher (the manifest's
// `idle`), waits for a note and answers with a continuation, sent with `promptAsync`. Hooks are
// spawned with `Bun.spawn` inside OpenCode (a Bun binary), `child_process.spawn` elsewhere (the unit
// tests under Node). On SIGTERM, SIGINT or SIGHUP (`opencode serve` runs no `dispose` then) it ends
// the sessions it saw for at most 2 s and lets the signal act as it would have. The one answer that
// changes a tool's arguments (`args`: Preloop's send_note with the caller's session id) is applied
// in place, never with a decision. No dependencies (OpenCode installs nothing for it); a failure here is logged in
// one line and never stops OpenCode. The default export is the only export: OpenCode calls every
// exported value as a plugin.
import { spawn as nodeSpawn } from "node:child_process";
import { appendFileSync, mkdirSync, readFileSync, renameSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const VERSION = "@@PRELOOP_VERSION@@";
const PROTOCOL = 1;
const LOG_MAX = 1 << 20;
const HARNESS = "opencode";
/** The answers this plugin applies (`args`: Preloop's send_note with the caller's session id). */
const ANSWER_KINDS = ["context", "deny", "continue", "args"];
const GUARD = Symbol.for("preloop-hooks.opencode-plugin");
const B62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

// @@PRELOOP_CORE@@

/**
 * `Bun.spawn` behind the face of `child_process.spawn` that `ask` uses: `on("error"|"close")`,
 * `stdin.write/end/on`, `stdout.on("data")`, `kill`, `unref`. The contract measured it at ~2 ms a
 * hook where `child_process.spawn` took ~15 under load (docs/performance.md). A missing executable throws, as
 * `child_process.spawn` reports it: the caller's fail policy applies.
 */
function bunSpawner(bun) {
	return function spawn(cmd, args) {
		const proc = bun.spawn([cmd, ...args], { stdin: "pipe", stdout: "pipe", stderr: "ignore" });
		const on = { error: [], close: [], data: [] };
		const emit = (k, ...a) => {
			for (const f of on[k]) {
				try {
					f(...a);
				} catch {}
			}
		};
		let ended = false;
		// FileSink's flush and end may return a promise: a hook gone away must not reject unheard.
		const quiet = (p) => {
			if (p && typeof p.catch === "function") p.catch(() => {});
		};
		const child = {
			on(k, f) {
				if (on[k]) on[k].push(f);
				return child;
			},
			kill(sig) {
				proc.kill(sig);
			},
			unref() {
				try {
					proc.unref();
				} catch {}
			},
			stdin: {
				on() {},
				unref() {},
				write(text) {
					if (ended) return;
					proc.stdin.write(text);
					quiet(proc.stdin.flush());
				},
				end(text) {
					if (ended) return;
					ended = true;
					try {
						if (text !== undefined) proc.stdin.write(text);
						quiet(proc.stdin.end());
					} catch {}
				},
			},
			stdout: {
				on(k, f) {
					if (k === "data") on.data.push(f);
				},
				unref() {},
			},
		};
		(async () => {
			const text = new TextDecoder();
			try {
				for await (const chunk of proc.stdout) emit("data", text.decode(chunk, { stream: true }));
			} catch {}
			let code = null;
			try {
				code = await proc.exited;
			} catch {}
			const signal = proc.signalCode || null;
			emit("close", signal ? null : code, signal);
		})();
		return child;
	};
}

/** `Bun.spawn` inside OpenCode (a Bun binary), `child_process.spawn` under Node. */
function defaultSpawn(g = globalThis) {
	return g.Bun && typeof g.Bun.spawn === "function" ? bunSpawner(g.Bun) : nodeSpawn;
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

/** The signals that stop OpenCode without its `dispose` (`opencode serve` has no handler of its own). */
const EXIT_SIGNALS = ["SIGTERM", "SIGINT", "SIGHUP"];
/** How long a signal waits for the sessions' ends before OpenCode goes on exiting. */
const SIGNAL_GRACE_MS = 2000;
const SIGNAL_NUMBERS = { SIGHUP: 1, SIGINT: 2, SIGTERM: 15 };

/**
 * On SIGTERM, SIGINT or SIGHUP: `endAll(signal)` (the end hook of every session seen), for at most
 * `graceMs`; then, unless OpenCode listens to that signal itself (it then exits its own way, as it
 * would have), the signal again with its default action, so OpenCode dies of it as it would have,
 * with the same status. Once: the first signal removes our listeners. Returns the uninstaller.
 */
function onExitSignals(endAll, { proc = process, graceMs = SIGNAL_GRACE_MS, log = () => {} } = {}) {
	const handlers = new Map();
	const uninstall = () => {
		for (const [sig, h] of handlers) proc.removeListener(sig, h);
		handlers.clear();
	};
	for (const sig of EXIT_SIGNALS) {
		const h = () => {
			uninstall();
			const theirs = proc.listenerCount(sig) > 0;
			let timer;
			const ends = Promise.resolve()
				.then(() => endAll(sig))
				.catch((e) => log(`ending the sessions on ${sig}: ${e && e.message}`));
			const bounded = Promise.race([ends, new Promise((r) => (timer = setTimeout(() => r("late"), graceMs)))]);
			bounded.then((late) => {
				clearTimeout(timer);
				if (late === "late") log(`the sessions' ends took over ${graceMs} ms on ${sig}; OpenCode exits anyway`);
				if (theirs) return;
				try {
					proc.kill(proc.pid, sig);
				} catch {}
				// A runtime that kept the signal ignored once no listener is left: exit as the signal would.
				const t = setTimeout(() => proc.exit(128 + (SIGNAL_NUMBERS[sig] || 15)), 1000);
				if (t && typeof t.unref === "function") t.unref();
			});
		};
		handlers.set(sig, h);
		proc.on(sig, h);
	}
	return uninstall;
}

/** The plugin over a manifest (`load` returns `{manifest, error}`), a spawner and argv: tests give fakes. */
function createPlugin({ load, spawn = defaultSpawn(), fs, argv = process.argv, proc = process, signalGraceMs = SIGNAL_GRACE_MS } = {}) {
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
		/**
		 * Per session: continued (our continuation since the last prompt), rescues, our own texts,
		 * the last prompt's agent and model, and the idle watcher (at most one).
		 */
		const sessions = new Map();
		/** The MCP servers OpenCode's config names (its `config` hook): the hook tells MCP tools by them. */
		let mcpServers = [];
		const sess = (id) => {
			let s = sessions.get(id);
			if (!s) {
				s = { continued: false, rescues: 0, mine: new Set(), last: {}, watcher: null };
				sessions.set(id, s);
			}
			return s;
		};

		async function run(event, sessionID, fields, started) {
			const payload = { v: PROTOCOL, event, session_id: String(sessionID || ""), mode, ...fields };
			if (cwd) payload.cwd = cwd;
			// A sub-agent's session: every hook names its parent, and the hook records the lineage.
			const known = sessions.get(payload.session_id);
			if (known && known.parent && !payload.parent_session_id) payload.parent_session_id = known.parent;
			const hooks = manifest.hooks[event];
			const r = await ask(Array.isArray(hooks) ? hooks[0] : undefined, payload, spawn, started);
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
		/**
		 * The idle watcher (`idle` in the manifest): started on `session.idle` where OpenCode stays
		 * alive after a run (`serve`, the TUI: in `run` it disposes at the first idle, and a message
		 * sent then reaches no model), at most one per session, none for a sub-agent's session. It decides when to wake: it answers
		 * only with a note, which `promptAsync` sends as a new turn; `applied` only once that resolved.
		 */
		function watch(id) {
			const s = sess(id);
			if (mode === "run" || s.child || s.watcher || !Array.isArray(manifest.hooks.idle)) return;
			const mine = { child: null };
			s.watcher = mine;
			run("idle", id, {}, (c) => {
				mine.child = c;
				// The watcher never keeps OpenCode's process alive.
				unrefChild(c);
			}).then(async (r) => {
				if (s.watcher === mine) s.watcher = null;
				if (!r.answer) return;
				if (mine.stopped || !sessions.has(id)) {
					// A run started or the session ended while the answer was on its way.
					logLine(log, "idle", "a wake was not sent (a run started or the session ended)", fs);
					r.confirm(false);
					return;
				}
				await apply(r, "idle", "continue", async (text) => {
					if (!client || !client.session || typeof client.session.promptAsync !== "function") throw new Error("no client");
					const body = { ...s.last, parts: [{ type: "text", text }] };
					// Our note, not a prompt: chat.message lets it pass.
					s.mine.add(text);
					try {
						const res = await client.session.promptAsync({ path: { id }, body });
						if (res && res.error) throw new Error(`session.promptAsync: ${JSON.stringify(res.error).slice(0, 200)}`);
					} catch (e) {
						s.mine.delete(text);
						throw e;
					}
					// A new turn: its own stop may continue it once.
					s.continued = false;
				});
			});
		}
		function unwatch(id) {
			const s = sessions.get(id);
			const w = s && s.watcher;
			if (!w) return;
			s.watcher = null;
			w.stopped = true;
			try {
				if (w.child) w.child.kill("SIGTERM");
			} catch {}
		}
		// `opencode serve` stopped by a signal runs no `dispose`: end the sessions here (bounded), then
		// let the signal do what it would have done.
		onExitSignals((sig) => Promise.all([...sessions.keys()].map((id) => end(id, sig))), {
			proc,
			graceMs: signalGraceMs,
			log: (text) => logLine(log, "signal", text, fs),
		});
		async function end(sessionID, reason) {
			unwatch(sessionID);
			const s = sessions.get(sessionID);
			sessions.delete(sessionID);
			const r = await run("dispose", sessionID, s && s.parent ? { reason, parent_session_id: s.parent } : { reason });
			if (r.answer) r.confirm(false);
		}

		return {
			event: async ({ event } = {}) => {
				const props = (event && event.properties) || {};
				if (event && event.type === "session.created") {
					const id = (props.info && props.info.id) || props.sessionID;
					if (!id) return;
					// A sub-agent's session (the task tool's): never woken, its parent reads its result.
					const parent = props.info && props.info.parentID;
					if (parent) Object.assign(sess(id), { child: true, parent: String(parent) });
					else sess(id);
					const r = await run("session.created", id, parent ? { parent_session_id: String(parent) } : {});
					if (r.answer) r.confirm(false);
				} else if (event && event.type === "session.deleted") {
					const id = (props.info && props.info.id) || props.sessionID;
					if (id && sessions.has(id)) await end(id, "deleted");
				} else if (event && event.type === "session.idle") {
					if (props.sessionID) watch(props.sessionID);
				} else if (event && event.type === "session.status") {
					// A run started: its own hooks carry the notes now.
					if (props.sessionID && props.status && props.status.type === "busy") unwatch(props.sessionID);
				}
			},
			"chat.message": async (input = {}, output = {}) => {
				const id = input.sessionID;
				const s = sess(id);
				const parts = Array.isArray(output.parts) ? output.parts : [];
				const texts = parts.filter((p) => p && p.type === "text" && typeof p.text === "string").map((p) => p.text);
				const prompt = texts.join("\n");
				unwatch(id);
				// Our own continuation (text.complete, the idle watcher): not a prompt.
				if (s.mine.has(prompt)) {
					s.mine.delete(prompt);
					return;
				}
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
			config: async (cfg) => {
				const mcp = cfg && cfg.mcp && typeof cfg.mcp === "object" ? cfg.mcp : {};
				mcpServers = Object.keys(mcp);
			},
			"tool.execute.before": async (input = {}, output = {}) => {
				const r = await run("tool.execute.before", input.sessionID, {
					tool_name: String(input.tool || ""),
					call_id: input.callID ? String(input.callID) : undefined,
					tool_input: output.args && typeof output.args === "object" ? output.args : {},
					mcp_servers: mcpServers,
				});
				if (r.error) {
					if (!denyOnError) return;
					throw new Error(`Preloop could not check this tool call (${r.error}); pre_tool_use_on_error is deny`);
				}
				if (!r.answer) return;
				if (r.answer.kind === "args") {
					// The hook's arguments (Preloop's send_note with the caller's session id), set in the
					// object OpenCode hands the tool: replacing `output.args` itself would reach nothing.
					const args = r.answer.args;
					const target = output.args;
					if (!args || typeof args !== "object" || Array.isArray(args) || !target || typeof target !== "object") {
						logLine(log, "tool.execute.before", "an args answer with no arguments to set", fs);
						r.confirm(false);
						return;
					}
					for (const k of Object.keys(target)) if (!Object.prototype.hasOwnProperty.call(args, k)) delete target[k];
					Object.assign(target, args);
					r.confirm(true);
					// No decision: OpenCode's own permission check runs next, on the tool's name.
					return;
				}
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
preloop.internals = {
	VERSION,
	PROTOCOL,
	GUARD,
	readManifest,
	logLine,
	ask,
	bunSpawner,
	defaultSpawn,
	modeOf,
	partIdAfter,
	createPlugin,
	manifestPath,
	onExitSignals,
	EXIT_SIGNALS,
};
