// The plugin's unit tests (`node --test hooks/opencode/shim/`), against a fake OpenCode host (its
// hook arguments and `client.session.prompt`) and a stand-in hook (shared/plugin/fake-hook.mjs) run as a real
// process: each answer kind, the confirmation that acks a note, a timeout, bad JSON, a missing
// executable, the fail policy, the rescue cap, session ends, a missing manifest, a second copy, the
// idle watcher, and the same through `Bun.spawn` (a fake `Bun` global over Node's child_process).
import assert from "node:assert/strict";
import { EventEmitter } from "node:events";
import { spawn as nodeSpawn } from "node:child_process";
import { mkdtempSync, readFileSync, existsSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { loadShim } from "../../../shared/plugin/assemble.mjs";

// The plugin as OpenCode gets it: source.js with the shared core (shared/plugin/assemble.mjs).
const mod = await loadShim("opencode");

const preloop = mod.default;
const { GUARD, createPlugin, readManifest, manifestPath, modeOf, partIdAfter, ask, bunSpawner, defaultSpawn } = preloop.internals;
const HERE = dirname(fileURLToPath(import.meta.url));
/** The stand-in hook every shim's tests share. */
const FAKE_HOOK = join(HERE, "..", "..", "..", "shared", "plugin", "fake-hook.mjs");
const EVENTS = ["session.created", "chat.message", "tool.execute.before", "tool.execute.after", "experimental.text.complete", "dispose"];
const S = "ses_dc0f1327dffehIInU0Fzi1o4KZ";

const RUN = ["bun", "/$bunfs/root/src/index.js", "run", "hi"];
const SERVE = ["bun", "/$bunfs/root/src/index.js", "serve", "--port", "4096"];

/**
 * `Bun.spawn` as Bun 1.3 has it, over Node's child_process: `[cmd, ...args]`, a FileSink stdin
 * (`write`, `flush`, `end`), an async-iterable stdout of bytes, `exited`, `signalCode`, `kill`,
 * `unref`; a missing executable throws at once.
 */
function fakeBun() {
	const calls = [];
	return {
		calls,
		spawn(cmd, opts) {
			calls.push({ cmd, opts });
			if (!existsSync(cmd[0])) throw Object.assign(new Error(`Executable not found in $PATH: "${cmd[0]}"`), { code: "ENOENT" });
			const c = nodeSpawn(cmd[0], cmd.slice(1), { stdio: ["pipe", "pipe", "ignore"] });
			c.stdin.on("error", () => {});
			let signalCode = null;
			const exited = new Promise((r) =>
				c.on("close", (code, sig) => {
					signalCode = sig;
					r(code ?? 128 + 9);
				}),
			);
			return {
				stdin: { write: (t) => c.stdin.write(t), flush() {}, end: () => c.stdin.end() },
				stdout: c.stdout,
				exited,
				get signalCode() {
					return signalCode;
				},
				kill: (sig) => c.kill(sig),
				unref: () => c.unref(),
			};
		},
	};
}

/** A stand-in for `process` as the signal handling uses it: listeners, `pid`, `kill`, `exit`. */
function fakeProc() {
	const em = new EventEmitter();
	em.pid = 4242;
	em.killed = [];
	em.exits = [];
	em.kill = (pid, sig) => em.killed.push([pid, sig, Date.now()]);
	em.exit = (code) => em.exits.push(code);
	return em;
}

async function setup({ mode = "context", onError = "allow", timeout = 5000, argv, cap, refuse = false, idle, procArgv = RUN, bun, proc = fakeProc(), grace } = {}) {
	delete globalThis[GUARD];
	const dir = mkdtempSync(join(tmpdir(), "preloop-opencode-shim-"));
	const record = join(dir, "record.jsonl");
	const log = join(dir, "log", "shim.log"); // a folder no hook made yet
	const hooks = {};
	for (const e of EVENTS) hooks[e] = [{ argv: argv ?? [process.execPath, FAKE_HOOK, mode, record], timeout }];
	// `idle`: the watcher's mode (no `idle` entry otherwise, as in a manifest without one).
	if (idle) hooks.idle = [{ argv: [process.execPath, FAKE_HOOK, idle, record], timeout }];
	const manifest = { version: 1, on_error: { "tool.execute.before": onError }, log, hooks };
	if (cap !== undefined) manifest.stop_rescue_cap = cap;
	const prompts = [];
	const wakes = [];
	const client = {
		session: {
			promptAsync: async (req) => {
				if (refuse) return { error: { name: "BadRequest" } };
				wakes.push(req);
				// 204 at once; OpenCode runs chat.message for the message a moment later.
				setTimeout(() => h["chat.message"]({ sessionID: req.path.id }, { message: { id: "msg_w" }, parts: req.body.parts }), 5);
				return { data: undefined };
			},
			prompt: async (req) => {
				if (refuse) return { error: { name: "BadRequest" } };
				prompts.push(req);
				// OpenCode runs chat.message for the message it stores.
				await h["chat.message"]({ sessionID: req.path.id }, { message: { id: "msg_x" }, parts: req.body.parts });
				return { data: {} };
			},
		},
	};
	if (bun) globalThis.Bun = bun;
	let h;
	try {
		h = await createPlugin({ load: () => ({ manifest }), argv: procArgv, proc, signalGraceMs: grace })({ client, directory: "/proj" });
	} finally {
		delete globalThis.Bun;
	}
	const records = () =>
		existsSync(record) ? readFileSync(record, "utf8").trim().split("\n").map((l) => JSON.parse(l)) : [];
	const logText = () => (existsSync(log) ? readFileSync(log, "utf8") : "");
	return { h, prompts, wakes, records, logText, dir, proc };
}
/** Until the stand-in recorded `n` confirmations (it exits right after each). */
async function confirmations(t, n = 1) {
	for (let i = 0; i < 300; i++) {
		const c = t.records().filter((r) => "confirm" in r);
		if (c.length >= n) return c.map((r) => r.confirm);
		await new Promise((r) => setTimeout(r, 10));
	}
	throw new Error("no confirmation recorded");
}
async function until(what, cond) {
	for (let i = 0; i < 300; i++) {
		if (cond()) return;
		await new Promise((r) => setTimeout(r, 10));
	}
	throw new Error(`timed out: ${what}`);
}
const idleEvent = (id = S) => ({ event: { type: "session.idle", properties: { sessionID: id } } });
const idles = (t) => t.records().filter((r) => r.payload && r.payload.event === "idle");
const chatOutput = () => ({
	message: { id: "msg_23f0ece00001uFjjRBaEw5bHhX", role: "user", sessionID: S, agent: "build", model: { providerID: "mock", modelID: "mock-model" } },
	parts: [{ type: "text", text: '"Run echo hi"', messageID: "msg_23f0ece00001uFjjRBaEw5bHhX", sessionID: S, id: "prt_23f0ece0e001JX6CvYxm84rQFo" }],
});

test("chat.message: context becomes a part of the prompt's message, after its own, then `applied`", async () => {
	const t = await setup({ mode: "context" });
	const out = chatOutput();
	await t.h["chat.message"]({ sessionID: S }, out);
	assert.equal(out.parts.length, 2);
	const p = out.parts[1];
	assert.equal(p.text, "<operator-notes>NOTE</operator-notes>");
	assert.deepEqual([p.type, p.sessionID, p.messageID], ["text", S, "msg_23f0ece00001uFjjRBaEw5bHhX"]);
	assert.ok(p.id > out.parts[0].id && p.id.startsWith("prt_23f0ece0e002"), p.id);
	assert.deepEqual(await confirmations(t), ["applied"]);
	assert.deepEqual(t.records()[0].payload, {
		v: 1,
		event: "chat.message",
		session_id: S,
		mode: "run",
		prompt: '"Run echo hi"',
		message_id: "msg_23f0ece00001uFjjRBaEw5bHhX",
		cwd: "/proj",
	});
});

test("tool.execute.after: context is appended to the tool's output", async () => {
	const t = await setup({ mode: "context" });
	const out = { title: "", output: "hi\n", metadata: {} };
	await t.h["tool.execute.after"]({ tool: "bash", sessionID: S, callID: "call_2_0", args: {} }, out);
	assert.equal(out.output, "hi\n\n\n<operator-notes>NOTE</operator-notes>");
	assert.deepEqual(await confirmations(t), ["applied"]);
	assert.equal(t.records()[0].payload.call_id, "call_2_0");
});

test("tool.execute.after: an output it cannot append to is not confirmed, and nothing throws", async () => {
	const t = await setup({ mode: "context" });
	await t.h["tool.execute.after"]({ tool: "bash", sessionID: S }, {});
	assert.deepEqual(await confirmations(t), [""]);
	assert.match(t.logText(), /OpenCode refused the note/);
});

test("tool.execute.before: a deny throws the hook's reason (the tool's result), confirmed first", async () => {
	const t = await setup({ mode: "deny" });
	await assert.rejects(
		t.h["tool.execute.before"]({ tool: "bash", sessionID: S, callID: "c1" }, { args: { command: "rm -rf build" } }),
		{ message: "DENIED: policy" },
	);
	assert.deepEqual(await confirmations(t), ["applied"]);
	assert.deepEqual(t.records()[0].payload.tool_input, { command: "rm -rf build" });
	assert.equal(t.records()[0].payload.tool_name, "bash");
});

test("tool.execute.before: an args answer replaces the arguments in the very object OpenCode hands the tool", async () => {
	const t = await setup({ mode: "args" });
	await t.h.config({ mcp: { preloop: { type: "local", command: ["x"] }, other: { type: "remote", url: "u" } } });
	const output = { args: { text: "hello child", preloop_caller_session_id: "FORGED", extra: 1 } };
	const same = output.args;
	assert.equal(await t.h["tool.execute.before"]({ tool: "preloop_send_note", sessionID: S, callID: "c1" }, output), undefined);
	// In place: OpenCode 1.18.33 calls the MCP server with the object it passed as `output.args`.
	assert.equal(output.args, same);
	assert.deepEqual(output.args, { text: "hello child", preloop_caller_session_id: "ses_caller" });
	assert.deepEqual(await confirmations(t), ["applied"]);
	const p = t.records()[0].payload;
	assert.deepEqual(p.mcp_servers, ["preloop", "other"]);
	assert.equal(p.tool_name, "preloop_send_note");
	assert.deepEqual(p.tool_input, { text: "hello child", preloop_caller_session_id: "FORGED", extra: 1 });
});

test("tool.execute.before: an args answer that is no object changes nothing and is not confirmed", async () => {
	const t = await setup({ mode: "badargs" });
	const output = { args: { text: "t" } };
	assert.equal(await t.h["tool.execute.before"]({ tool: "preloop_send_note", sessionID: S }, output), undefined);
	assert.deepEqual(output.args, { text: "t" });
	assert.deepEqual(await confirmations(t), [""]);
	assert.match(t.logText(), /an args answer with no arguments to set/);
	// With no config hook call, the payload names no MCP server.
	assert.deepEqual(t.records()[0].payload.mcp_servers, []);
});

test("experimental.text.complete: a continuation is a noReply prompt with the prompt's agent and model", async () => {
	const t = await setup({ mode: "continue" });
	await t.h["chat.message"]({ sessionID: S }, chatOutput());
	await t.h["experimental.text.complete"]({ sessionID: S, messageID: "msg_a", partID: "prt_a" }, { text: "done" });
	assert.equal(t.prompts.length, 1);
	assert.deepEqual(t.prompts[0], {
		path: { id: S },
		body: {
			noReply: true,
			agent: "build",
			model: { providerID: "mock", modelID: "mock-model" },
			parts: [{ type: "text", text: "<operator-notes>LATE</operator-notes>" }],
		},
	});
	// The continuation's own chat.message ran no hook: one payload per event above.
	assert.deepEqual(
		t.records().filter((r) => r.payload).map((r) => r.payload.event),
		["chat.message", "experimental.text.complete"],
	);
	const stop = t.records().filter((r) => r.payload)[1].payload;
	assert.equal(stop.stop_hook_active, false);
});

test("the rescue cap: one continuation per stop, at most stop_rescue_cap per session", async () => {
	const t = await setup({ mode: "continue", cap: 2 });
	const stop = () => t.h["experimental.text.complete"]({ sessionID: S, messageID: "m" }, { text: "x" });
	const prompt = () => t.h["chat.message"]({ sessionID: S }, chatOutput());
	await stop(); // continues
	await stop(); // the continuation's own stop: stop_hook_active, and the shim would not send it
	await prompt(); // a real prompt: a new stop may continue
	await stop(); // continues (2 of 2)
	await prompt();
	await stop(); // past the cap
	assert.equal(t.prompts.length, 2);
	const active = t.records().filter((r) => r.payload && r.payload.event === "experimental.text.complete").map((r) => r.payload.stop_hook_active);
	assert.deepEqual(active, [false, true, false, true]);
	assert.match(t.logText(), /a continuation was not sent \(one per stop, 2 per session\)/);
	// OpenCode has no brake: even a hook that keeps answering gets no third continuation.
});

test("a continuation OpenCode refuses is not confirmed (the hook keeps the note)", async () => {
	const t = await setup({ mode: "continue", refuse: true });
	await t.h["experimental.text.complete"]({ sessionID: S, messageID: "m" }, { text: "x" });
	assert.deepEqual(await confirmations(t), [""]);
	assert.match(t.logText(), /OpenCode refused the note: session.prompt/);
});

test("an answer of the wrong kind for the event is not applied", async () => {
	const t = await setup({ mode: "context" });
	assert.equal(await t.h["tool.execute.before"]({ tool: "bash", sessionID: S }, { args: {} }), undefined);
	assert.deepEqual(await confirmations(t), [""]);
	const u = await setup({ mode: "deny" });
	const out = chatOutput();
	await u.h["chat.message"]({ sessionID: S }, out);
	assert.equal(out.parts.length, 1);
	assert.deepEqual(await confirmations(u), [""]);
});

test("session.created registers; dispose ends every session the plugin saw", async () => {
	const t = await setup({ mode: "nothing" });
	await t.h.event({ event: { type: "session.created", properties: { sessionID: S, info: { id: S } } } });
	await t.h.event({ event: { type: "session.created", properties: { info: { id: "ses_child", parentID: S } } } });
	await t.h.event({ event: { type: "session.idle", properties: { sessionID: S } } });
	await t.h.dispose();
	const seen = t.records().filter((r) => r.payload).map((r) => [r.payload.event, r.payload.session_id, r.payload.reason]);
	assert.deepEqual(seen, [
		["session.created", S, undefined],
		["session.created", "ses_child", undefined],
		["dispose", S, "dispose"],
		["dispose", "ses_child", "dispose"],
	]);
	await t.h.dispose();
	assert.equal(t.records().filter((r) => r.payload).length, 4, "a session ends once");
});

test("nothing to say: nothing applied, nothing logged", async () => {
	const t = await setup({ mode: "nothing" });
	assert.equal(await t.h["tool.execute.before"]({ tool: "bash", sessionID: S }, { args: {} }), undefined);
	const out = chatOutput();
	await t.h["chat.message"]({ sessionID: S }, out);
	assert.equal(out.parts.length, 1);
	await t.h["experimental.text.complete"]({ sessionID: S }, { text: "x" });
	assert.equal(t.prompts.length, 0);
	assert.equal(t.logText(), "");
});

for (const [name, opts, why] of [
	["a timeout", { mode: "sleep", timeout: 300 }, /no answer within 300 ms/],
	["bad JSON", { mode: "badjson" }, /not JSON/],
	["an answer without its newline", { mode: "nonewline" }, /without its newline/],
	["an unknown answer", { mode: "unknown" }, /does not know: .*unknown_command/],
	["a missing executable", { argv: ["/nonexistent/preloop-hooks", "hook", "preloop-opencode-tool-execute-before"] }, /cannot run .*ENOENT/],
]) {
	test(`${name}: the tool call follows on_error, and one line is logged`, async () => {
		const open = await setup({ ...opts, onError: "allow" });
		assert.equal(await open.h["tool.execute.before"]({ tool: "bash", sessionID: S }, { args: {} }), undefined);
		assert.match(open.logText(), why);
		assert.equal(open.logText().trim().split("\n").length, 1);
		const closed = await setup({ ...opts, onError: "deny" });
		await assert.rejects(closed.h["tool.execute.before"]({ tool: "bash", sessionID: S }, { args: {} }), {
			message: /Preloop could not check this tool call .*pre_tool_use_on_error is deny/,
		});
		// Other hooks carry nothing and never throw.
		const out = chatOutput();
		await closed.h["chat.message"]({ sessionID: S }, out);
		assert.equal(out.parts.length, 1);
		const after = { output: "hi" };
		await closed.h["tool.execute.after"]({ tool: "bash", sessionID: S }, after);
		assert.equal(after.output, "hi");
		await closed.h["experimental.text.complete"]({ sessionID: S }, { text: "x" });
		await closed.h.dispose();
		assert.equal(closed.prompts.length, 0);
	});
}

test("no manifest: no hooks, one line is logged, OpenCode starts", async () => {
	delete globalThis[GUARD];
	const dir = mkdtempSync(join(tmpdir(), "preloop-opencode-nomanifest-"));
	const hooks = await createPlugin({ load: () => readManifest(join(dir, "preloop.json")) })({});
	assert.deepEqual(hooks, {});
	assert.match(readManifest("/nonexistent/preloop.json").error, /ENOENT/);
});

test("a second copy in the same OpenCode registers nothing", async () => {
	const t = await setup();
	const more = await createPlugin({ load: () => ({ manifest: { hooks: {} } }) })({});
	assert.deepEqual(Object.keys(t.h).sort(), ["chat.message", "config", "dispose", "event", "experimental.text.complete", "tool.execute.after", "tool.execute.before"]);
	assert.deepEqual(more, {});
});

test("the module exports one plugin function only, which never throws", async () => {
	assert.deepEqual(Object.keys(mod), ["default"]);
	delete globalThis[GUARD];
	assert.deepEqual(await preloop(undefined), {});
	assert.equal(manifestPath("file:///x/plugins/preloop.js"), "/x/plugins/preloop.json");
});

test("the mode comes from OpenCode's argv; part ids sort after the previous one", () => {
	assert.equal(modeOf(["bun", "/$bunfs/root/src/index.js", "run", "x"]), "run");
	assert.equal(modeOf(["bun", "/$bunfs/root/src/index.js", "serve", "--port", "1"]), "serve");
	assert.equal(modeOf(["bun", "/$bunfs/root/src/index.js"]), "tui");
	assert.equal(modeOf(["bun", "/$bunfs/root/src/index.js", "--model", "m"]), "tui");
	const a = partIdAfter("prt_23f0ece0e001JX6CvYxm84rQFo");
	assert.match(a, /^prt_23f0ece0e002[0-9A-Za-z]{14}$/);
	assert.match(partIdAfter(null, 1796354264576), /^prt_[0-9a-f]{12}[0-9A-Za-z]{14}$/);
});

test("a manifest that is not one is refused", () => {
	const dir = mkdtempSync(join(tmpdir(), "preloop-opencode-manifest-"));
	writeFileSync(join(dir, "preloop.json"), "[]");
	assert.match(readManifest(join(dir, "preloop.json")).error, /no hooks/);
});

test("idle: in serve the watcher's continuation is a promptAsync with the prompt's agent and model, then `applied`", async () => {
	const t = await setup({ mode: "nothing", idle: "continue", procArgv: SERVE });
	await t.h["chat.message"]({ sessionID: S }, chatOutput());
	await t.h.event(idleEvent());
	await until("the wake", () => t.wakes.length === 1);
	assert.deepEqual(t.wakes[0], {
		path: { id: S },
		body: { agent: "build", model: { providerID: "mock", modelID: "mock-model" }, parts: [{ type: "text", text: "<operator-notes>LATE</operator-notes>" }] },
	});
	assert.deepEqual(await confirmations(t), ["applied"]);
	const w = idles(t);
	assert.equal(w.length, 1);
	assert.deepEqual(w[0].payload, { v: 1, event: "idle", session_id: S, mode: "serve", cwd: "/proj" });
	// The note's own chat.message is ours, not a prompt: no second chat.message hook ran.
	await new Promise((r) => setTimeout(r, 100));
	assert.equal(t.records().filter((r) => r.payload && r.payload.event === "chat.message").length, 1);
	assert.equal(t.logText(), "");
});

test("idle: no watcher in `opencode run` (it disposes at the first idle: a wake would reach no model)", async () => {
	const t = await setup({ mode: "nothing", idle: "continue", procArgv: RUN });
	await t.h.event(idleEvent());
	await new Promise((r) => setTimeout(r, 300));
	assert.equal(idles(t).length, 0);
	assert.equal(t.wakes.length, 0);
});

test("idle: one watcher per session, stopped when a run starts (session.status busy, chat.message) and at dispose", async () => {
	const t = await setup({ mode: "nothing", idle: "sleep", procArgv: SERVE });
	const stops = () => t.logText().match(/idle shim stopped by SIGTERM/g)?.length ?? 0;
	await t.h.event(idleEvent());
	await until("the watcher runs", () => idles(t).length === 1);
	await t.h.event(idleEvent());
	await new Promise((r) => setTimeout(r, 200));
	assert.equal(idles(t).length, 1, "a second session.idle started no second watcher");
	await t.h.event(idleEvent("ses_other"));
	await until("another session has its own", () => idles(t).length === 2);
	await t.h.event({ event: { type: "session.status", properties: { sessionID: S, status: { type: "busy" } } } });
	await until("stopped by busy", () => stops() === 1);
	await t.h.event(idleEvent());
	await until("a new watcher after the run", () => idles(t).length === 3);
	await t.h["chat.message"]({ sessionID: S }, chatOutput());
	await until("stopped by a prompt", () => stops() === 2);
	await t.h.event(idleEvent());
	await until("a new watcher after the run", () => idles(t).length === 4);
	await t.h.dispose();
	await until("stopped at dispose, both sessions", () => stops() === 4);
	assert.equal(t.wakes.length, 0);
});

test("idle: a wake OpenCode refuses is not confirmed (the watcher keeps the note)", async () => {
	const t = await setup({ mode: "nothing", idle: "continue", procArgv: SERVE, refuse: true });
	await t.h.event(idleEvent());
	assert.deepEqual(await confirmations(t), [""]);
	assert.match(t.logText(), /idle shim OpenCode refused the note: session.promptAsync/);
});

test("idle: a wake that arrives after the session ended is not sent", async () => {
	const t = await setup({ mode: "nothing", idle: "continue", procArgv: SERVE });
	await t.h.event(idleEvent());
	// dispose before the watcher's answer is read: it is stopped, or its answer is dropped.
	await t.h.dispose();
	await new Promise((r) => setTimeout(r, 300));
	assert.equal(t.wakes.length, 0);
	for (const c of t.records().filter((r) => "confirm" in r)) assert.equal(c.confirm, "");
});

test("Bun.spawn: chosen when a Bun global exists (OpenCode), child_process.spawn under Node", () => {
	assert.equal(defaultSpawn({}), nodeSpawn);
	const bun = fakeBun();
	assert.notEqual(defaultSpawn({ Bun: bun }), nodeSpawn);
	assert.equal(defaultSpawn({ Bun: {} }), nodeSpawn, "a Bun without spawn is not used");
});

test("Bun.spawn: each answer kind applied and confirmed as under child_process", async () => {
	const bun = fakeBun();
	const t = await setup({ mode: "context", bun });
	const out = chatOutput();
	await t.h["chat.message"]({ sessionID: S }, out);
	assert.equal(out.parts[1].text, "<operator-notes>NOTE</operator-notes>");
	assert.deepEqual(await confirmations(t), ["applied"]);
	assert.equal(bun.calls.length, 1, "the hook ran through Bun.spawn");
	assert.deepEqual(bun.calls[0].opts, { stdin: "pipe", stdout: "pipe", stderr: "ignore" });
	const d = await setup({ mode: "deny", bun: fakeBun() });
	await assert.rejects(d.h["tool.execute.before"]({ tool: "bash", sessionID: S }, { args: {} }), { message: "DENIED: policy" });
	assert.deepEqual(await confirmations(d), ["applied"]);
	const n = await setup({ mode: "nothing", bun: fakeBun() });
	assert.equal(await n.h["tool.execute.before"]({ tool: "bash", sessionID: S }, { args: {} }), undefined);
	assert.equal(n.logText(), "");
});

test("Bun.spawn: the idle watcher's wake, applied; stopped by SIGTERM when a run starts", async () => {
	const t = await setup({ mode: "nothing", idle: "continue", procArgv: SERVE, bun: fakeBun() });
	await t.h.event(idleEvent());
	await until("the wake", () => t.wakes.length === 1);
	assert.deepEqual(await confirmations(t), ["applied"]);
	const u = await setup({ mode: "nothing", idle: "sleep", procArgv: SERVE, bun: fakeBun() });
	await u.h.event(idleEvent());
	await until("the watcher runs", () => idles(u).length === 1);
	await u.h.event({ event: { type: "session.status", properties: { sessionID: S, status: { type: "busy" } } } });
	await until("stopped", () => /idle shim stopped by SIGTERM/.test(u.logText()));
});

for (const [name, opts, why] of [
	["a timeout", { mode: "sleep", timeout: 300 }, /no answer within 300 ms/],
	["bad JSON", { mode: "badjson" }, /not JSON/],
	["an answer without its newline", { mode: "nonewline" }, /without its newline/],
	["a missing executable", { argv: ["/nonexistent/preloop-hooks", "hook", "preloop-opencode-tool-execute-before"] }, /cannot run .*ENOENT/],
]) {
	test(`Bun.spawn: ${name}: the tool call follows on_error, and one line is logged`, async () => {
		const open = await setup({ ...opts, onError: "allow", bun: fakeBun() });
		assert.equal(await open.h["tool.execute.before"]({ tool: "bash", sessionID: S }, { args: {} }), undefined);
		assert.match(open.logText(), why);
		assert.equal(open.logText().trim().split("\n").length, 1);
		const closed = await setup({ ...opts, onError: "deny", bun: fakeBun() });
		await assert.rejects(closed.h["tool.execute.before"]({ tool: "bash", sessionID: S }, { args: {} }), {
			message: /Preloop could not check this tool call .*pre_tool_use_on_error is deny/,
		});
	});
}

test("Bun.spawn: ask over a hook that exits non-zero with no answer is an error", async () => {
	const r = await ask({ argv: [process.execPath, "-e", "process.exit(3)"], timeout: 5000 }, { v: 1 }, bunSpawner(fakeBun()));
	assert.deepEqual(r, { error: "exit 3 with no answer" });
});

test("idle: no watcher for a sub-agent's session (the task tool's child)", async () => {
	const t = await setup({ mode: "nothing", idle: "continue", procArgv: SERVE });
	await t.h.event({ event: { type: "session.created", properties: { info: { id: "ses_child", parentID: S } } } });
	await t.h.event(idleEvent("ses_child"));
	await new Promise((r) => setTimeout(r, 300));
	assert.equal(idles(t).length, 0);
	assert.equal(t.wakes.length, 0);
});

test("a sub-agent's session names its parent on every hook it runs, its end too; the parent's names none", async () => {
	const t = await setup({ mode: "nothing" });
	await t.h.event({ event: { type: "session.created", properties: { info: { id: S } } } });
	await t.h.event({ event: { type: "session.created", properties: { info: { id: "ses_child", parentID: S } } } });
	await t.h["chat.message"]({ sessionID: "ses_child" }, { message: { id: "msg_c" }, parts: [{ type: "text", text: "do it" }] });
	await t.h["tool.execute.before"]({ tool: "bash", sessionID: "ses_child" }, { args: { command: "x" } });
	await t.h["tool.execute.after"]({ tool: "bash", sessionID: "ses_child" }, { output: "" });
	await t.h["chat.message"]({ sessionID: S }, chatOutput());
	await t.h.dispose();
	const payloads = t.records().filter((r) => r.payload).map((r) => r.payload);
	const child = payloads.filter((p) => p.session_id === "ses_child");
	assert.deepEqual(
		child.map((p) => [p.event, p.parent_session_id]),
		[
			["session.created", S],
			["chat.message", S],
			["tool.execute.before", S],
			["tool.execute.after", S],
			["dispose", S],
		],
	);
	const parent = payloads.filter((p) => p.session_id === S);
	assert.deepEqual(parent.map((p) => p.event), ["session.created", "chat.message", "dispose"]);
	assert.ok(parent.every((p) => !("parent_session_id" in p)), JSON.stringify(parent));
});

const created = (id, parentID) => ({ event: { type: "session.created", properties: { info: parentID ? { id, parentID } : { id } } } });
const until_ = async (what, cond, ms = 3000) => {
	for (let i = 0; i < ms / 10; i++) {
		if (cond()) return;
		await new Promise((r) => setTimeout(r, 10));
	}
	throw new Error(`timed out: ${what}`);
};

test("SIGTERM (no listener of OpenCode's): every session's end hook runs, then the signal again with its default action", async () => {
	const t = await setup({ mode: "nothing", procArgv: SERVE });
	await t.h.event(created(S));
	await t.h.event(created("ses_child", S));
	assert.equal(t.proc.listenerCount("SIGTERM"), 1);
	t.proc.emit("SIGTERM");
	// Our listeners are gone at once: the re-raised signal meets the default action.
	for (const sig of ["SIGTERM", "SIGINT", "SIGHUP"]) assert.equal(t.proc.listenerCount(sig), 0, sig);
	await until_("the re-raise", () => t.proc.killed.length === 1);
	assert.deepEqual(t.proc.killed[0].slice(0, 2), [4242, "SIGTERM"]);
	const ends = t.records().filter((r) => r.payload && r.payload.event === "dispose").map((r) => r.payload);
	assert.deepEqual(ends.map((p) => [p.session_id, p.reason]).sort(), [["ses_child", "SIGTERM"], [S, "SIGTERM"]].sort());
	// A later dispose (were OpenCode to run one) ends nothing twice.
	await t.h.dispose();
	assert.equal(t.records().filter((r) => r.payload && r.payload.event === "dispose").length, 2);
	assert.deepEqual(t.proc.exits, []);
});

test("a signal OpenCode listens to itself: the ends run, the signal is not raised again (OpenCode exits its own way)", async () => {
	const t = await setup({ mode: "nothing", procArgv: ["bun", "/$bunfs/root/src/index.js"] });
	let theirs = 0;
	t.proc.on("SIGHUP", () => theirs++);
	await t.h.event(created(S));
	t.proc.emit("SIGHUP");
	assert.equal(theirs, 1);
	await until_("the end", () => t.records().some((r) => r.payload && r.payload.event === "dispose"));
	await new Promise((r) => setTimeout(r, 100));
	assert.deepEqual(t.proc.killed, []);
	assert.equal(t.records().find((r) => r.payload && r.payload.event === "dispose").payload.reason, "SIGHUP");
});

test("a signal waits for the ends a bounded moment only: a hook that never answers does not keep OpenCode alive", async () => {
	const t = await setup({ mode: "sleep", procArgv: SERVE, grace: 300 });
	await t.h.event(created(S));
	const t0 = Date.now();
	t.proc.emit("SIGINT");
	await until_("the re-raise", () => t.proc.killed.length === 1);
	const waited = t.proc.killed[0][2] - t0;
	assert.ok(waited >= 250 && waited < 1500, `${waited} ms`);
	assert.equal(t.proc.killed[0][1], "SIGINT");
	assert.match(t.logText(), /signal shim the sessions' ends took over 300 ms on SIGINT/);
});

test("a signal with no session: the signal again at once", async () => {
	const t = await setup({ mode: "nothing", procArgv: SERVE });
	t.proc.emit("SIGTERM");
	await until_("the re-raise", () => t.proc.killed.length === 1);
	assert.equal(t.records().length, 0);
});

test("no manifest, no signal handling: OpenCode's signals stay as they were", async () => {
	delete globalThis[GUARD];
	const proc = fakeProc();
	const dir = mkdtempSync(join(tmpdir(), "preloop-opencode-nomanifest-"));
	await createPlugin({ load: () => readManifest(join(dir, "preloop.json")), proc })({});
	assert.equal(proc.listenerCount("SIGTERM"), 0);
});
