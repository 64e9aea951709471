"""Run the real Preloop 0.17.1 server as `python -m preloop.server` does, plus the
MCP endpoint's lifespan (docs/contracts/preloop-server-mcp.md).

The kit sets TESTING=true (0.17.1 refuses to start without NATS otherwise), and 0.17.1
then skips entering the FastMCP StreamableHTTP lifespan (api/app.py: `if not is_testing
and is_api_role`), so every POST /mcp/v1 answers 500 ("Task group is not initialized").
This launcher enters that lifespan (preloop.services.mcp_http.get_mcp_lifespan_manager)
inside the app's own lifespan, and changes nothing else.

    python serve_with_mcp.py --host 127.0.0.1 --port PORT
"""
import argparse
import contextlib

import uvicorn

import preloop.logging as preloop_logging


def create_app():
    from preloop.api.app import create_app as create
    from preloop.services.mcp_http import get_mcp_lifespan_manager

    app = create()
    inner = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(a):
        async with inner(a) as state:
            manager = get_mcp_lifespan_manager()
            if manager is None:
                raise RuntimeError("preloop built no MCP lifespan manager")
            async with manager:
                yield state

    app.router.lifespan_context = lifespan
    return app


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    a = p.parse_args()
    preloop_logging.configure_logging()
    uvicorn.run(create_app, host=a.host, port=a.port, factory=True)


if __name__ == "__main__":
    main()
