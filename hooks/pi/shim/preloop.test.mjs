// The extension's unit tests (`node --test hooks/pi/shim/`), against a fake Pi host and a
// stand-in hook (shared/plugin/fake-hook.mjs) run as a real process: each answer kind, the confirmation that
// acks a note, a timeout, bad JSON, a missing executable, the fail policy, a missing manifest,
// and a second copy of the extension.
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, existsSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { loadShim } from "../../../shared/plugin/assemble.mjs";

// The extension as Pi gets it: source.js with the shared core (shared/plugin/assemble.mjs).
const { default: preloop, createExtension, readManifest, manifestPath, NOTE_TYPE } = await loadShim("pi");

const HERE = dirname(fileURLToPath(import.meta.url));
/** The stand-in hook every shim's tests share. */
const FAKE_HOOK = join(HERE, "..", "..", "..", "shared", "plugin", "fake-hook.mjs");
const GUARD = Symbol.for("preloop-hooks.pi-extension");
const EVENTS = ["session_start", "before_agent_start", "tool_call", "tool_result", "agent_end", "session_shutdown"];

function setup({ mode = "context", onError = "allow", timeout = 5000, argv, idle } = {}) {
	delete globalThis[GUARD];
	const dir = mkdtempSync(join(tmpdir(), "preloop-pi-shim-"));
	const record = join(dir, "record.jsonl");
	const log = join(dir, "log", "shim.log"); // a folder no hook made yet
	const hooks = {};
	for (const e of EVENTS) hooks[e] = [{ argv: argv ?? [process.execPath, FAKE_HOOK, mode, record], timeout }];
	// `idle`: the watcher's mode (no `idle` entry otherwise, as in a manifest without one).
	if (idle) hooks.idle = [{ argv: [process.execPath, FAKE_HOOK, idle, record], timeout }];
	const manifest = { version: 1, on_error: { tool_call: onError }, log, hooks };
	const handlers = {};
	const sent = [];
	const pi = {
		on: (e, h) => (handlers[e] = h),
		sendMessage: (m, o) => {
			if (pi.refuse) throw new Error("This extension ctx is stale");
			sent.push([m, o]);
		},
	};
	createExtension({ load: () => ({ manifest }) })(pi);
	const records = () =>
		existsSync(record) ? readFileSync(record, "utf8").trim().split("\n").map((l) => JSON.parse(l)) : [];
	const logText = () => (existsSync(log) ? readFileSync(log, "utf8") : "");
	return { pi, handlers, sent, records, logText, dir };
}
const ctx = (hasUI = true) => ({
	cwd: "/proj",
	hasUI,
	sessionManager: { getSessionId: () => "01a23f09-32d5-70d3-a97c-a90dc1360fde", getSessionFile: () => null },
});
const until = async (what, f) => {
	for (let i = 0; i < 300; i++) {
		const v = f();
		if (v) return v;
		await new Promise((r) => setTimeout(r, 10));
	}
	throw new Error(`never: ${what}`);
};
/** Until the stand-in recorded its confirmation (it exits right after). */
async function confirmation(t) {
	for (let i = 0; i < 200; i++) {
		const c = t.records().find((r) => "confirm" in r);
		if (c) return c.confirm;
		await new Promise((r) => setTimeout(r, 10));
	}
	throw new Error("no confirmation recorded");
}

test("before_agent_start: context becomes the returned message, then `applied`", async () => {
	const t = setup({ mode: "context" });
	const r = await t.handlers.before_agent_start({ prompt: "Run echo hi" }, ctx());
	assert.deepEqual(r, { message: { customType: NOTE_TYPE, content: "<operator-notes>NOTE</operator-notes>", display: true } });
	assert.equal(await confirmation(t), "applied");
	assert.deepEqual(t.records()[0].payload, {
		v: 1,
		event: "before_agent_start",
		session_id: "01a23f09-32d5-70d3-a97c-a90dc1360fde",
		has_ui: true,
		prompt: "Run echo hi",
		cwd: "/proj",
	});
});

test("session_start and tool_result hand the note to Pi's queue (nextTurn, steer)", async () => {
	const t = setup({ mode: "context" });
	await t.handlers.session_start({ reason: "startup" }, ctx());
	assert.equal(await confirmation(t), "applied");
	assert.equal(t.sent[0][1].deliverAs, "nextTurn");
	const u = setup({ mode: "context" });
	await u.handlers.tool_result({ toolName: "bash", toolCallId: "c1", content: [] }, ctx());
	assert.equal(await confirmation(u), "applied");
	assert.deepEqual(u.sent[0][1], { deliverAs: "steer" });
	assert.deepEqual(u.records()[0].payload.tool_name, "bash");
});

test("tool_call: a deny blocks with the hook's reason", async () => {
	const t = setup({ mode: "deny" });
	const r = await t.handlers.tool_call({ toolName: "bash", toolCallId: "c1", input: { command: "rm -rf build" } }, ctx());
	assert.deepEqual(r, { block: true, reason: "DENIED: policy" });
	assert.equal(await confirmation(t), "applied");
	assert.deepEqual(t.records()[0].payload.tool_input, { command: "rm -rf build" });
});

test("agent_end: a continuation starts a new turn once Pi is idle", async () => {
	const t = setup({ mode: "continue" });
	await t.handlers.agent_end({ messages: [] }, ctx(true));
	assert.equal(t.sent.length, 0, "not inside agent_end");
	assert.equal(await confirmation(t), "applied");
	assert.deepEqual(t.sent[0][1], { deliverAs: "steer", triggerTurn: true });
	assert.equal(t.records()[0].payload.has_ui, true);
});

test("a note Pi refuses is not confirmed (the hook keeps it)", async () => {
	const t = setup({ mode: "continue" });
	t.pi.refuse = true;
	await t.handlers.agent_end({}, ctx(true));
	assert.equal(await confirmation(t), "");
	assert.match(t.logText(), /Pi refused the note/);
});

test("an answer of the wrong kind for the event is not applied", async () => {
	const t = setup({ mode: "context" });
	assert.equal(await t.handlers.tool_call({ toolName: "bash", input: {} }, ctx()), undefined);
	assert.equal(await confirmation(t), "");
	const u = setup({ mode: "deny" });
	assert.equal(await u.handlers.before_agent_start({ prompt: "p" }, ctx()), undefined);
	assert.equal(await confirmation(u), "");
});

test("nothing to say: nothing applied, nothing logged", async () => {
	const t = setup({ mode: "nothing" });
	assert.equal(await t.handlers.tool_call({ toolName: "bash", input: {} }, ctx()), undefined);
	assert.equal(await t.handlers.before_agent_start({ prompt: "p" }, ctx()), undefined);
	assert.equal(t.sent.length, 0);
	assert.equal(t.logText(), "");
});

for (const [name, opts, why] of [
	["a timeout", { mode: "sleep", timeout: 300 }, /no answer within 300 ms/],
	["bad JSON", { mode: "badjson" }, /not JSON/],
	["an answer without its newline", { mode: "nonewline" }, /without its newline/],
	["an unknown command", { mode: "unknown" }, /does not know: .*unknown_command/],
	["a missing executable", { argv: ["/nonexistent/preloop-hooks", "hook", "preloop-pi-tool-call"] }, /cannot run .*ENOENT/],
]) {
	test(`${name}: the tool call follows on_error, and one line is logged`, async () => {
		const open = setup({ ...opts, onError: "allow" });
		assert.equal(await open.handlers.tool_call({ toolName: "bash", input: {} }, ctx()), undefined);
		assert.match(open.logText(), why);
		assert.equal(open.logText().trim().split("\n").length, 1);
		const closed = setup({ ...opts, onError: "deny" });
		const r = await closed.handlers.tool_call({ toolName: "bash", input: {} }, ctx());
		assert.equal(r.block, true);
		assert.match(r.reason, /Preloop could not check this tool call .*pre_tool_use_on_error is deny/);
		// Other events carry nothing and never throw.
		assert.equal(await closed.handlers.before_agent_start({ prompt: "p" }, ctx()), undefined);
		await closed.handlers.session_shutdown({ reason: "quit" }, ctx());
		assert.equal(closed.sent.length, 0);
	});
}

test("no manifest: nothing is registered, one line is logged, Pi starts", () => {
	delete globalThis[GUARD];
	const handlers = {};
	createExtension({ load: () => readManifest("/nonexistent/preloop.json") })({ on: (e, h) => (handlers[e] = h) });
	assert.deepEqual(Object.keys(handlers), []);
	assert.match(readManifest("/nonexistent/preloop.json").error, /ENOENT/);
});

test("a second copy in the same Pi registers nothing", () => {
	const t = setup();
	const more = {};
	createExtension({ load: () => ({ manifest: { hooks: {} } }) })({ on: (e, h) => (more[e] = h) });
	assert.deepEqual(Object.keys(t.handlers).sort(), [...EVENTS, "agent_start"].sort());
	assert.deepEqual(Object.keys(more), []);
});

test("the default export never throws, whatever the host", () => {
	delete globalThis[GUARD];
	preloop({});
	delete globalThis[GUARD];
	preloop(null);
	assert.equal(manifestPath("file:///x/ext/preloop.js"), "/x/ext/preloop.json");
});

test("a manifest that is not one is refused", () => {
	const dir = mkdtempSync(join(tmpdir(), "preloop-pi-manifest-"));
	writeFileSync(join(dir, "preloop.json"), "[]");
	assert.match(readManifest(join(dir, "preloop.json")).error, /no hooks/);
	// `typeof null` is "object": a null `hooks` is no hooks too (it once passed and failed later).
	writeFileSync(join(dir, "preloop.json"), '{"version": 1, "hooks": null}');
	assert.match(readManifest(join(dir, "preloop.json")).error, /no hooks/);
});

test("idle: the watcher's continuation starts a turn, confirmed once applied", async () => {
	const t = setup({ mode: "nothing", idle: "continue" });
	await t.handlers.session_start({ reason: "startup" }, ctx(true));
	assert.equal(await confirmation(t), "applied");
	assert.deepEqual(t.sent[0][1], { deliverAs: "steer", triggerTurn: true });
	assert.equal(t.sent[0][0].content, "<operator-notes>LATE</operator-notes>");
	const idle = t.records().filter((r) => r.payload && r.payload.event === "idle");
	assert.equal(idle.length, 1);
	assert.equal(idle[0].payload.has_ui, true);
});

test("idle: no watcher where Pi does not stay alive (-p, json)", async () => {
	const t = setup({ mode: "nothing", idle: "continue" });
	await t.handlers.session_start({ reason: "startup" }, ctx(false));
	await t.handlers.agent_end({ messages: [] }, ctx(false));
	await new Promise((r) => setTimeout(r, 300));
	assert.equal(t.records().filter((r) => r.payload && r.payload.event === "idle").length, 0);
	assert.equal(t.sent.length, 0);
});

test("idle: one watcher at a time, stopped when a run starts and at session_shutdown", async () => {
	const t = setup({ mode: "nothing", idle: "sleep" });
	const idles = () => t.records().filter((r) => r.payload && r.payload.event === "idle").length;
	await t.handlers.session_start({ reason: "startup" }, ctx(true));
	await t.handlers.agent_end({ messages: [] }, ctx(true));
	await until("the watcher runs", () => idles() === 1);
	await new Promise((r) => setTimeout(r, 200));
	assert.equal(idles(), 1, "a second agent_end started no second watcher");
	t.handlers.agent_start({}, ctx(true));
	await until("the watcher is stopped", () => /idle shim stopped by SIGTERM/.test(t.logText()));
	await t.handlers.agent_end({ messages: [] }, ctx(true));
	await until("a new watcher after the run", () => idles() === 2);
	await t.handlers.session_shutdown({ reason: "quit" }, ctx(true));
	await until("stopped at shutdown", () => t.logText().match(/stopped by SIGTERM/g)?.length === 2);
	assert.equal(t.sent.length, 0);
});
