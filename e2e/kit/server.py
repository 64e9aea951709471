"""The real Preloop server of the server-mode suites: brought up and down by
e2e/preloop_server/ (ensure_server, stop_server; require_server / release_server in
setUpModule / tearDownModule) and driven through its REST API as a human operator
(ServerClient: accounts, agents, tool configurations, notes, receipts, approvals).

e2e/preloop_server/up.sh stands PyPI preloop==0.17.1 up on 127.0.0.1 (its own PostgreSQL 16
+ pgvector), migrates it and seeds a user (personal API key), a managed agent and its agt_
runtime token into creds.json."""

import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid

from .common import E2E_DIR, KitError, log, poll_state, shorten

__all__ = ["SERVER_DIR", "ServerClient", "ServerError", "ensure_server", "release_server",
           "require_server", "server_home", "server_log_tail", "stop_server"]

SERVER_DIR = os.path.join(E2E_DIR, "preloop_server")


def server_home():
    return (os.environ.get("PRELOOP_E2E_SERVER_HOME") or "/tmp/preloop-e2e-server").rstrip("/")


def ensure_server(timeout=None):
    """Run e2e/preloop_server/up.sh (idempotent: seconds when already up, ~2 min cold) and
    return creds.json as a dict, plus "up_log" (the script's output) and "up_s".
    Raises KitError holding the script's output and the server log's tail on failure."""
    timeout = timeout or float(os.environ.get("PRELOOP_E2E_SERVER_TIMEOUT", "1200"))
    up = os.path.join(SERVER_DIR, "up.sh")
    log("bringing up the real Preloop server: %s" % up)
    t0 = time.time()
    env = dict(os.environ)
    for k in ("PRELOOP_URL", "PRELOOP_TOKEN", "PRELOOP_HOME"):
        env.pop(k, None)
    try:
        p = subprocess.run(["bash", up], capture_output=True, text=True, timeout=timeout,
                           stdin=subprocess.DEVNULL, env=env)
        rc, out = p.returncode, (p.stdout or "") + (p.stderr or "")
    except subprocess.TimeoutExpired as e:
        rc = None
        out = "%s%s\n[up.sh killed after %ss]" % (
            e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or ""),
            e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or ""),
            timeout)
    dur = round(time.time() - t0, 1)
    home = server_home()
    if rc != 0:
        tail = ""
        log_path = os.path.join(home, "server.log")
        if os.path.exists(log_path):
            with open(log_path, errors="replace") as f:
                tail = "".join(f.readlines()[-40:])
        raise KitError("the real Preloop server did not come up: `bash %s` exited %s after %ss\n"
                       "--- up.sh output ---\n%s\n--- tail of %s ---\n%s"
                       % (up, rc, dur, out[-8000:], log_path, tail[-6000:]))
    with open(os.path.join(home, "creds.json")) as f:
        creds = json.load(f)
    creds["up_log"] = out
    creds["up_s"] = dur
    # Whether this call started the API server (then stop_server() may stop it again).
    creds["started_server"] = bool(re.search(r"server_start: started", out))
    log("Preloop server up in %ss at %s" % (dur, creds.get("base_url")))
    return creds


def stop_server():
    """e2e/preloop_server/down.sh: stop the API server, then Postgres, by their PID files
    (keeps the database and the venv, so the next start is warm). Returns its output."""
    p = subprocess.run(["bash", os.path.join(SERVER_DIR, "down.sh")], capture_output=True,
                       text=True, timeout=120, stdin=subprocess.DEVNULL)
    return p.returncode, (p.stdout or "") + (p.stderr or "")


def require_server(prereq, wiring=None):
    """setUpModule helper: the real server up (ensure_server, as prereq "creds") and
    prereq "server", a ServerClient as the human operator. Returns the creds, or None when
    the server could not come up (every test that needs it then fails with the reason)."""
    creds = prereq.get("creds", ensure_server)
    if creds:
        prereq.set("server", ServerClient(creds["base_url"], creds["user_token"]))
        sys.stderr.write("[e2e] real server: preloop %s at %s (up.sh took %ss)%s\n"
                         % (creds.get("preloop_version"), creds["base_url"], creds["up_s"],
                            "; hooks wired by %s" % wiring if wiring else ""))
    return creds


def release_server(prereq):
    """tearDownModule helper: leave the server as this module found it: stop it (down.sh,
    by PID) only when this run started it, unless PRELOOP_E2E_SERVER_KEEP=1 (then the next
    run finds it up: ~2 s)."""
    creds = prereq["creds"]
    if creds and creds.get("started_server") and os.environ.get("PRELOOP_E2E_SERVER_KEEP") != "1":
        rc, out = stop_server()
        sys.stderr.write("[e2e] stopped the Preloop server this run started (down.sh rc=%s)\n" % rc)
        if rc != 0:
            sys.stderr.write(out[-3000:] + "\n")


class ServerError(KitError):
    pass


class ServerClient:
    """The Preloop REST API as a human uses it (user token: personal API key or JWT);
    never through a proxy."""

    _opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def __init__(self, base_url, user_token=None):
        self.base_url = base_url.rstrip("/")
        self.api = self.base_url + "/api/v1"
        self.user_token = user_token

    def call(self, method, path, body=None, token=None, timeout=30.0):
        """(status, parsed JSON or text) of one request; token defaults to the user's."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.api + path, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        tok = self.user_token if token is None else token   # "" = no Authorization header
        if tok:
            req.add_header("Authorization", "Bearer " + tok)
        try:
            with self._opener.open(req, timeout=timeout) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as e:
            status, raw = e.code, e.read()
        except (urllib.error.URLError, OSError) as e:
            raise ServerError("%s %s: cannot reach %s: %s" % (method, path, self.base_url, e))
        try:
            payload = json.loads(raw) if raw else None
        except ValueError:
            payload = raw.decode(errors="replace")
        return status, payload

    def must(self, expected, method, path, body=None, token=None):
        status, payload = self.call(method, path, body, token)
        if status not in expected:
            raise ServerError("%s %s%s -> %s, want %s: %s" % (
                method, self.api, path, status, expected,
                shorten(json.dumps(payload, ensure_ascii=False), 1500)))
        return payload

    # -- accounts and agents ---------------------------------------------------
    def new_agent(self, name=None, kind="claude_code"):
        """A fresh managed agent with a durable agt_ credential (sending is rate limited
        to 20 notes per hour per author and agent: mint one per scenario)."""
        name = name or "e2e %s %s" % (kind, uuid.uuid4().hex[:8])
        agent = self.must((201,), "POST", "/agents", {"display_name": name, "agent_kind": kind})
        cred = self.must((201,), "POST", "/agents/%s/credentials" % agent["id"],
                         {"name": "e2e", "expires_in_days": 30})
        return {"agent_id": agent["id"], "agent_token": cred["token"], "display_name": name,
                "agent_kind": kind}

    def new_account(self, tag="e2e"):
        """Register a brand-new user (and with it a new account); return a ServerClient
        authenticated with its personal API key, with .account_id / .user_id set."""
        username = "%s%s" % (re.sub(r"[^a-z0-9]", "", tag.lower())[:20] or "e2e", uuid.uuid4().hex[:10])
        password = "e2e-pass-" + uuid.uuid4().hex[:12]
        self.must((201,), "POST", "/auth/register", {
            "username": username, "email": "%s@example.com" % username, "password": password,
            "full_name": "E2E Operator %s" % tag}, token="")
        tok = self.must((200,), "POST", "/auth/token/json",
                        {"username": username, "password": password}, token="")["access_token"]
        me = self.must((200,), "GET", "/auth/users/me", token=tok)
        key = self.must((201,), "POST", "/auth/api-keys", {"name": "e2e-%s" % tag}, token=tok)["key"]
        c = ServerClient(self.base_url, key)
        c.account_id, c.user_id, c.username = me["account_id"], me["id"], username
        return c

    def disable_tool(self, account_id, tool_name):
        """An account-wide agent tool configuration that is disabled: every
        permission-check for that tool name answers deny, `Tool blocked in Preloop`."""
        return self.must((201,), "POST", "/tool-configurations", {
            "tool_name": tool_name, "tool_source": "agent", "account_id": account_id,
            "is_enabled": False})

    # -- notes -------------------------------------------------------------------
    def send_note(self, text, **target):
        body = dict(target, text=text)
        return self.must((201,), "POST", "/operator-notes", body)

    def receipt(self, note_id):
        return self.must((200,), "GET", "/operator-notes/%s" % note_id)

    def parent_of(self, runtime_session_id):
        """The parent the server recorded for a runtime session (None: none)."""
        rec = self.must((200,), "GET", "/runtime-sessions/%s" % runtime_session_id)
        return rec.get("session", rec).get("parent_session_id")

    def wait_receipt(self, note_id, states, timeout=8.0):
        """Poll GET /operator-notes/{id} until its state is in `states`; the last one."""
        return poll_state(lambda: self.receipt(note_id), states, timeout)

    def send_note_argv(self, text, **target):
        """argv for a mock before_reply_cmd that sends this note (server_note.py; it reads
        the API base and user token from the environment, see server_note_env())."""
        body = dict(target, text=text)
        return [sys.executable, os.path.join(E2E_DIR, "server_note.py"),
                json.dumps(body, ensure_ascii=False)]

    def receipt_argv(self, note_id_or_file):
        """argv for a before_reply_cmd that prints the receipt at that moment of the run
        ("@FILE": the note id is read from FILE when the command runs)."""
        return [sys.executable, os.path.join(E2E_DIR, "server_note.py"), "--receipt",
                note_id_or_file]

    def server_note_env(self):
        return {"PRELOOP_E2E_API": self.api, "PRELOOP_E2E_USER_TOKEN": self.user_token}

    # -- approvals ---------------------------------------------------------------
    def pending_approvals(self, agent_id=None):
        items = self.must((200,), "GET", "/approval-requests?status=pending&limit=50") or []
        if isinstance(items, dict):
            items = items.get("items") or items.get("approval_requests") or []
        return [a for a in items if agent_id is None or a.get("managed_agent_id") == agent_id]

    def approve(self, request_id, comment=""):
        return self.must((200,), "POST", "/approval-requests/%s/approve" % request_id,
                         {"comment": comment})


def server_log_tail(lines=30):
    path = os.path.join(server_home(), "server.log")
    if not os.path.exists(path):
        return []
    with open(path, errors="replace") as f:
        return [shorten(l.rstrip("\n"), 400) for l in f.readlines()[-lines:]]
