// preloop-hooks Pi extension @@PRELOOP_VERSION@@. Written by `preloop-hooks install --harness pi`
// from hooks/pi/shim/source.js and shared/plugin/core.js; do not edit (`preloop-hooks doctor` compares it byte for byte).
//
// A shim, nothing more: on each Pi event it runs the hook command our manifest `preloop.json`
// (beside this file) names, `preloop-hooks hook preloop-pi-<event>`, with one line of JSON on
// stdin, reads one line of JSON back and applies it: context for the model, a deny with its
// reason, or a continuation. Then it writes `applied` on the hook's stdin, and only then does
// the hook ack the notes `delivered` (hooks/pi/README.md). Every decision is the hook's. No
// dependencies; a failure here is logged in one line and never stops Pi (a load error would).
import { spawn as nodeSpawn } from "node:child_process";
import { appendFileSync, mkdirSync, readFileSync, renameSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const VERSION = "@@PRELOOP_VERSION@@";
export const PROTOCOL = 1;
export const NOTE_TYPE = "preloop-operator-notes";
const LOG_MAX = 1 << 20;
const HARNESS = "pi";
/** The answers this extension applies. */
const ANSWER_KINDS = ["context", "deny", "continue"];
const GUARD = Symbol.for("preloop-hooks.pi-extension");

// @@PRELOOP_CORE@@

/** Pi runs extensions under Node. */
function defaultSpawn() {
	return nodeSpawn;
}

export { readManifest, logLine, ask };

/** The extension over a manifest (`load` returns `{manifest, error}`) and a spawner: tests give fakes. */
export function createExtension({ load, spawn = nodeSpawn, fs } = {}) {
	return function preloop(pi) {
		if (globalThis[GUARD]) {
			// Pi loads a global and a project copy both (de-duplicated by path only).
			logLine(globalThis[GUARD].log, "load", `a second copy was not loaded (${VERSION})`, fs);
			return;
		}
		const { manifest, error } = load();
		const log = manifest && typeof manifest.log === "string" ? manifest.log : null;
		globalThis[GUARD] = { log };
		if (!manifest) {
			// No manifest, no command: tool calls follow the documented default (open), logged.
			logLine(log, "load", `${error}; nothing runs (run preloop-hooks install --harness pi)`, fs);
			return;
		}
		const denyOnError = manifest.on_error && manifest.on_error.tool_call === "deny";
		const note = (text) => ({ customType: NOTE_TYPE, content: String(text), display: true });

		async function run(event, ctx, fields, started) {
			let sm = ctx && ctx.sessionManager;
			const payload = {
				v: PROTOCOL,
				event,
				session_id: String((sm && sm.getSessionId && sm.getSessionId()) || ""),
				has_ui: Boolean(ctx && ctx.hasUI),
				...fields,
			};
			const file = sm && sm.getSessionFile && sm.getSessionFile();
			if (file) payload.session_file = String(file);
			if (ctx && ctx.cwd) payload.cwd = String(ctx.cwd);
			const hooks = manifest.hooks[event];
			const r = await ask(Array.isArray(hooks) ? hooks[0] : undefined, payload, spawn, started);
			if (r.error) logLine(log, event, r.error, fs);
			return r;
		}
		/** Apply a context or continuation answer with `hand`; confirm only if it went to Pi. */
		function apply(r, kind, hand) {
			if (!r.answer) return false;
			if (r.answer.kind !== kind || typeof r.answer.text !== "string" || !r.answer.text) {
				logLine(log, "apply", `a ${r.answer.kind} answer where ${kind} was due`, fs);
				r.confirm(false);
				return false;
			}
			try {
				hand(note(r.answer.text));
			} catch (e) {
				logLine(log, "apply", `Pi refused the note: ${e && e.message}`, fs);
				r.confirm(false);
				return false;
			}
			r.confirm(true);
			return true;
		}

		pi.on("session_start", async (e, ctx) => {
			const r = await run("session_start", ctx, { reason: e && e.reason });
			apply(r, "context", (m) => pi.sendMessage(m, { deliverAs: "nextTurn" }));
			watch(ctx);
		});
		pi.on("before_agent_start", async (e, ctx) => {
			const r = await run("before_agent_start", ctx, { prompt: String((e && e.prompt) || "") });
			let message;
			apply(r, "context", (m) => {
				message = m;
			});
			if (message) return { message };
		});
		pi.on("tool_call", async (e, ctx) => {
			const r = await run("tool_call", ctx, {
				tool_name: String((e && e.toolName) || ""),
				tool_call_id: e && e.toolCallId ? String(e.toolCallId) : undefined,
				tool_input: e && e.input && typeof e.input === "object" ? e.input : {},
			});
			if (r.error) {
				if (!denyOnError) return;
				return { block: true, reason: `Preloop could not check this tool call (${r.error}); pre_tool_use_on_error is deny` };
			}
			if (!r.answer) return;
			if (r.answer.kind !== "deny") {
				logLine(log, "apply", `a ${r.answer.kind} answer to a tool call`, fs);
				r.confirm(false);
				return;
			}
			r.confirm(true);
			return { block: true, reason: String(r.answer.reason || "Blocked by Preloop policy") };
		});
		pi.on("tool_result", async (e, ctx) => {
			const r = await run("tool_result", ctx, {
				tool_name: String((e && e.toolName) || ""),
				tool_call_id: e && e.toolCallId ? String(e.toolCallId) : undefined,
			});
			apply(r, "context", (m) => pi.sendMessage(m, { deliverAs: "steer" }));
		});
		// A continuation (agent_end, the idle watcher): once Pi is idle (inside agent_end it is
		// not yet), a new run ending with the note; while a run goes on, a steer in it.
		const wake = (m) => pi.sendMessage(m, { deliverAs: "steer", triggerTurn: true });

		// The idle watcher (`idle` in the manifest): at most one child, started where Pi stays
		// alive (`hasUI`) and sits idle; it decides when to wake (it answers only with a note).
		let watcher = null;
		function watch(ctx) {
			if (watcher || !(ctx && ctx.hasUI) || !Array.isArray(manifest.hooks.idle)) return;
			const mine = { child: null };
			watcher = mine;
			run("idle", ctx, {}, (c) => {
				mine.child = c;
				// The watcher never keeps Pi's process alive.
				unrefChild(c);
			}).then((r) => {
				if (watcher === mine) watcher = null;
				if (r.answer) setTimeout(() => apply(r, "continue", wake), 0);
			});
		}
		function unwatch() {
			const w = watcher;
			watcher = null;
			try {
				if (w && w.child) w.child.kill("SIGTERM");
			} catch {}
		}

		// A run started (a prompt, a continuation): its own hooks carry the notes now.
		pi.on("agent_start", () => unwatch());
		pi.on("agent_end", async (_e, ctx) => {
			const r = await run("agent_end", ctx, {});
			if (!r.answer) return watch(ctx);
			setTimeout(() => apply(r, "continue", wake), 0);
		});
		pi.on("session_shutdown", async (e, ctx) => {
			unwatch();
			const r = await run("session_shutdown", ctx, { reason: e && e.reason });
			if (r.answer) r.confirm(false);
		});
	};
}

/** `preloop.json` beside this file. */
export function manifestPath(url = import.meta.url) {
	return join(dirname(fileURLToPath(url)), "preloop.json");
}

export default function preloop(pi) {
	try {
		createExtension({ load: () => readManifest(manifestPath()) })(pi);
	} catch {
		// Never fatal to Pi: a load error stops it from starting.
	}
}
