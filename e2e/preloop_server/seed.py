#!/usr/bin/env python3
"""Seed the loopback Preloop server with a user, agents and test fixtures.

Standard library only (runs under any Python >= 3.8), talks to the server's
public REST API on 127.0.0.1 and never through a proxy.

  seed.py [ensure] [--reseed]
      Make creds.json describe working credentials: reuse every piece that
      still authenticates, re-mint only what does not (a purged database, a
      revoked credential). --reseed registers a brand-new user (new account)
      and mints everything afresh. Prints one summary line.

  seed.py new-agent [--kind KIND] [--name NAME] [--native-approvals off|enforce]
                    [--approval-timeout SECONDS]
      Mint one more managed agent and its durable agt_ credential and print
      it as one line of JSON. Tests want a fresh agent per case: sending notes is rate
      limited to 20 per rolling hour per (author, agent).

  seed.py check
      Verify creds.json against the server; exit 1 if anything is stale.

Knobs: PRELOOP_E2E_SERVER_HOME (/tmp/preloop-e2e-server; creds.json lives there),
PRELOOP_E2E_SERVER_PORT (27765). up.sh runs `ensure`; the e2e suite mints its own
agents through the same API (e2e/kit/server.py, ServerClient).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
import time
import urllib.error
import urllib.request
from typing import Any, Dict, Optional, Tuple

HOME = os.environ.get("PRELOOP_E2E_SERVER_HOME", "/tmp/preloop-e2e-server").rstrip("/")
PORT = int(os.environ.get("PRELOOP_E2E_SERVER_PORT", "27765"))
BASE_URL = f"http://127.0.0.1:{PORT}"
API = f"{BASE_URL}/api/v1"
CREDS_PATH = os.path.join(HOME, "creds.json")

DEFAULT_USERNAME = "hookoperator"
DEFAULT_PASSWORD = "hook-operator-pass-1"
FULL_NAME = "Hook Operator"
DENIED_TOOL = "PreloopDeniedTool"
FAST_TIMEOUT_S = 3
FAST_WORKFLOW = "hook-tests-fast-timeout"
CREDENTIAL_NAME = "hooks"

# Never through a proxy, whatever the caller's environment says.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class SeedError(RuntimeError):
    pass


def call(method: str, path: str, token: Optional[str] = None,
         body: Any = None, timeout: float = 30.0) -> Tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(API + path, data=data, method=method)
    req.add_header("Accept", "application/json")
    if data is not None:
        req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with _OPENER.open(req, timeout=timeout) as resp:
            status, raw = resp.status, resp.read()
    except urllib.error.HTTPError as err:
        status, raw = err.code, err.read()
    except (urllib.error.URLError, OSError) as err:
        raise SeedError(f"{method} {path}: cannot reach {BASE_URL}: {err}") from err
    try:
        payload = json.loads(raw) if raw else None
    except ValueError:
        payload = raw.decode(errors="replace")
    return status, payload


def must(expected: Tuple[int, ...], method: str, path: str, token: Optional[str] = None,
         body: Any = None) -> Any:
    status, payload = call(method, path, token, body)
    if status not in expected:
        raise SeedError(f"{method} {path} -> {status}: {json.dumps(payload)[:400]}")
    return payload


# --- building blocks --------------------------------------------------------

def login(username: str, password: str) -> Optional[str]:
    status, payload = call("POST", "/auth/token/json",
                           body={"username": username, "password": password})
    if status == 200 and isinstance(payload, dict) and payload.get("access_token"):
        return payload["access_token"]
    if status in (400, 401, 403):
        return None
    raise SeedError(f"POST /auth/token/json -> {status}: {payload}")


def register(username: str, password: str) -> None:
    # example.com: reserved TLDs such as .test are rejected by the email validator.
    must((201,), "POST", "/auth/register", body={
        "username": username, "email": f"{username}@example.com",
        "password": password, "full_name": FULL_NAME,
    })


def token_works_for_user(token: str) -> bool:
    status, _ = call("GET", "/auth/users/me", token)
    return status == 200


def agent_token_works(token: str) -> bool:
    # session-event answers 204 to any authenticated runtime token and records
    # nothing for a session id that was never started: a side-effect-free probe.
    status, _ = call("POST", "/agents/session-event", token,
                     {"session_id": "seed-credential-probe", "hook_event_name": "Stop"})
    return status == 204


def create_agent(user_token: str, display_name: str, kind: str) -> Dict[str, Any]:
    agent = must((201,), "POST", "/agents", user_token,
                 {"display_name": display_name, "agent_kind": kind})
    cred = must((201,), "POST", f"/agents/{agent['id']}/credentials", user_token,
                {"name": CREDENTIAL_NAME, "expires_in_days": 3650})
    return {
        "agent_id": agent["id"],
        "agent_token": cred["token"],
        "credential_id": cred["credential"]["id"],
        "display_name": display_name,
        "agent_kind": agent.get("agent_kind", kind),
        "session_source_type": agent.get("session_source_type"),
        "session_source_id": agent.get("session_source_id"),
    }


def ensure_workflow(user_token: str, name: str, timeout_s: int) -> str:
    for wf in must((200,), "GET", "/approval-workflows", user_token) or []:
        if wf.get("name") == name:
            return wf["id"]
    status, payload = call("POST", "/approval-workflows", user_token, {
        "name": name, "approval_type": "standard", "timeout_seconds": timeout_s,
        "description": f"preloop-hooks e2e: escalations time out after {timeout_s}s",
    })
    if status == 201:
        return payload["id"]
    if status == 400:  # created concurrently by another seed.py
        for wf in must((200,), "GET", "/approval-workflows", user_token) or []:
            if wf.get("name") == name:
                return wf["id"]
    raise SeedError(f"POST /approval-workflows -> {status}: {payload}")


def set_governance(user_token: str, agent_id: str, **config: Any) -> None:
    must((200,), "PUT", f"/agents/{agent_id}/governance", user_token, config)


def ensure_denied_tool(user_token: str, account_id: str) -> None:
    status, payload = call("POST", "/tool-configurations", user_token, {
        "tool_name": DENIED_TOOL, "tool_source": "agent",
        "account_id": account_id, "is_enabled": False,
    })
    if status == 201:
        return
    if status == 400 and "already exists" in json.dumps(payload):
        return
    raise SeedError(f"POST /tool-configurations -> {status}: {payload}")


def short_id() -> str:
    return secrets.token_hex(4)


def mint_fast_timeout_agent(user_token: str) -> Dict[str, Any]:
    wf = ensure_workflow(user_token, FAST_WORKFLOW, FAST_TIMEOUT_S)
    agent = create_agent(user_token, "Hook Test Agent (fast approval timeout)", "claude_code")
    set_governance(user_token, agent["agent_id"], approval_workflow_id=wf,
                   native_tool_approvals="enforce")
    agent.update(approval_workflow_id=wf, approval_timeout_seconds=FAST_TIMEOUT_S)
    return agent


def mint_auto_approve_agent(user_token: str) -> Dict[str, Any]:
    agent = create_agent(user_token, "Hook Test Agent (approvals off)", "codex")
    set_governance(user_token, agent["agent_id"], native_tool_approvals="off")
    agent.update(native_tool_approvals="off")
    return agent


# --- creds.json ---------------------------------------------------------------

def load_creds() -> Optional[Dict[str, Any]]:
    try:
        with open(CREDS_PATH) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def write_creds(creds: Dict[str, Any]) -> None:
    os.makedirs(HOME, exist_ok=True)
    tmp = f"{CREDS_PATH}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(creds, f, indent=2)
        f.write("\n")
    os.replace(tmp, CREDS_PATH)


def user_token_for_cli(creds: Dict[str, Any]) -> str:
    """A user credential for new-agent: the personal API key, else a fresh JWT."""
    for key in ("user_token", "user_jwt"):
        tok = creds.get(key)
        if tok and token_works_for_user(tok):
            return tok
    jwt = login(creds["username"], creds["password"])
    if not jwt:
        raise SeedError("creds.json no longer matches the server; run up.sh")
    return jwt


# --- commands -------------------------------------------------------------------

def cmd_ensure(reseed: bool) -> int:
    old = None if reseed else load_creds()
    actions = []
    if old and old.get("username") and old.get("password"):
        username, password = old["username"], old["password"]
    elif reseed:
        username, password = f"{DEFAULT_USERNAME}{short_id()}", DEFAULT_PASSWORD
    else:
        username, password = DEFAULT_USERNAME, DEFAULT_PASSWORD

    jwt = login(username, password)
    if jwt is None:
        try:
            register(username, password)
        except SeedError as err:
            raise SeedError(f"cannot log in as {username} and registering it failed ({err}); "
                            "run down.sh --purge then up.sh, or up.sh --reseed") from err
        actions.append(f"registered {username}")
        jwt = login(username, password)
        if jwt is None:
            raise SeedError(f"registered {username} but cannot log in")
    else:
        actions.append(f"logged in as {username}")
    me = must((200,), "GET", "/auth/users/me", jwt)
    same_user = bool(old) and old.get("user_id") == me["id"]
    if not same_user:
        old = None  # nothing in an old creds.json belongs to this database

    user_token = (old or {}).get("user_token")
    if not (user_token and token_works_for_user(user_token)):
        key = must((201,), "POST", "/auth/api-keys", jwt,
                   {"name": f"hook-tests-{int(time.time())}-{short_id()}"})
        user_token = key["key"]
        actions.append("minted personal API key")

    fixtures = {
        "agent": lambda: create_agent(user_token, "Hook Test Agent", "claude_code"),
        "fast_timeout_agent": lambda: mint_fast_timeout_agent(user_token),
        "auto_approve_agent": lambda: mint_auto_approve_agent(user_token),
    }
    agents: Dict[str, Dict[str, Any]] = {}
    minted, reused = [], []
    for key, mint in fixtures.items():
        prev = (old or {}).get(key)
        if prev and prev.get("agent_token") and agent_token_works(prev["agent_token"]):
            agents[key] = prev
            reused.append(key)
        else:
            agents[key] = mint()
            minted.append(key)
    # Re-assert the governance of reused fixtures (idempotent PUTs).
    if "fast_timeout_agent" in reused:
        a = agents["fast_timeout_agent"]
        wf = ensure_workflow(user_token, FAST_WORKFLOW, FAST_TIMEOUT_S)
        set_governance(user_token, a["agent_id"], approval_workflow_id=wf,
                       native_tool_approvals="enforce")
        a.update(approval_workflow_id=wf, approval_timeout_seconds=FAST_TIMEOUT_S)
    if "auto_approve_agent" in reused:
        set_governance(user_token, agents["auto_approve_agent"]["agent_id"],
                       native_tool_approvals="off")
    ensure_denied_tool(user_token, me["account_id"])

    creds = {
        "base_url": BASE_URL,
        "api_base": API,
        "agent_id": agents["agent"]["agent_id"],
        "agent_token": agents["agent"]["agent_token"],
        "user_token": user_token,
        "user_token_kind": "personal API key (no expiry); auth_method on notes = api_key",
        "user_jwt": jwt,
        "user_jwt_note": "HS256 access token, 24h lifetime (refreshed by every up.sh); auth_method on notes = jwt",
        "username": username,
        "password": password,
        "email": f"{username}@example.com",
        "full_name": FULL_NAME,
        "user_id": me["id"],
        "account_id": me["account_id"],
        "agent": agents["agent"],
        "fast_timeout_agent": agents["fast_timeout_agent"],
        "auto_approve_agent": agents["auto_approve_agent"],
        "denied_tool_name": DENIED_TOOL,
        "preloop_version": "0.17.1",
        "seeded_at": (old or {}).get("seeded_at") or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    write_creds(creds)
    if minted:
        actions.append("minted " + ", ".join(minted))
    if reused:
        actions.append("reused " + ", ".join(reused))
    print("; ".join(actions))
    return 0


def cmd_new_agent(args: argparse.Namespace) -> int:
    creds = load_creds()
    if not creds:
        raise SeedError(f"{CREDS_PATH} missing; run up.sh first")
    user_token = user_token_for_cli(creds)
    name = args.name or f"Hook Test Agent {short_id()}"
    agent = create_agent(user_token, name, args.kind)
    governance: Dict[str, Any] = {}
    if args.approval_timeout is not None:
        wf_name = (FAST_WORKFLOW if args.approval_timeout == FAST_TIMEOUT_S
                   else f"hook-tests-timeout-{args.approval_timeout}s")
        governance["approval_workflow_id"] = ensure_workflow(user_token, wf_name, args.approval_timeout)
        agent.update(approval_workflow_id=governance["approval_workflow_id"],
                     approval_timeout_seconds=args.approval_timeout)
    if args.native_approvals:
        governance["native_tool_approvals"] = args.native_approvals
        agent["native_tool_approvals"] = args.native_approvals
    if governance:
        set_governance(user_token, agent["agent_id"], **governance)
    agent["api_base"] = API
    print(json.dumps(agent))  # one line: callers parse the last line of stdout
    return 0


def cmd_check() -> int:
    creds = load_creds()
    if not creds:
        print(f"{CREDS_PATH} missing", file=sys.stderr)
        return 1
    problems = []
    if not login(creds["username"], creds["password"]):
        problems.append("user login")
    if not token_works_for_user(creds.get("user_token", "")):
        problems.append("user_token")
    for key in ("agent", "fast_timeout_agent", "auto_approve_agent"):
        if not agent_token_works(creds.get(key, {}).get("agent_token", "")):
            problems.append(f"{key}.agent_token")
    if problems:
        print("stale: " + ", ".join(problems), file=sys.stderr)
        return 1
    print("creds.json: all credentials authenticate")
    return 0


def main(argv: Optional[list] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd")
    p_ensure = sub.add_parser("ensure", help="create or refresh creds.json (default)")
    p_ensure.add_argument("--reseed", action="store_true",
                          help="register a new user and mint everything afresh")
    p_new = sub.add_parser("new-agent", help="mint one more agent + agt_ token, print JSON")
    p_new.add_argument("--kind", default="claude_code",
                       help="agent_kind, e.g. claude_code, codex, cursor (default claude_code)")
    p_new.add_argument("--name", help="display name (default: Hook Test Agent <hex>)")
    p_new.add_argument("--native-approvals", choices=("off", "enforce"),
                       help='"off": escalations are auto-approved at once')
    p_new.add_argument("--approval-timeout", type=int, metavar="SECONDS",
                       help="pin a workflow whose escalations time out after SECONDS")
    sub.add_parser("check", help="verify creds.json against the server")
    args = parser.parse_args(argv)
    try:
        if args.cmd in (None, "ensure"):
            return cmd_ensure(getattr(args, "reseed", False))
        if args.cmd == "new-agent":
            return cmd_new_agent(args)
        return cmd_check()
    except SeedError as err:
        print(f"seed.py: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
