"""`python -m fair_pipeline.platform.guarded_dagster -w workspace.yaml -h HOST -p PORT`: what `dagster dev` serves
(the webserver and the daemon, on the instance of $DAGSTER_HOME), with the webserver's app wrapped in
`ui_guard.DagsterGuard`.

`dagster dev` starts `python -m dagster_webserver` itself, which leaves no place for middleware; this process
serves the same Starlette app (`dagster_webserver.app.create_app_from_workspace_process_context`) through uvicorn
and runs the daemon as its child, as `dagster dev` does. The daemon is stopped when the webserver ends, and the
webserver is stopped (SIGTERM to this process) when the daemon dies, so the UI command sees one server exit.
"""
from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence

from fair_pipeline.platform.ui_guard import DagsterGuard, allowed_hosts_from_environment


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m fair_pipeline.platform.guarded_dagster", add_help=False,
                                     description="the Dagster webserver behind fair-pipeline's UI guard, plus the daemon")
    parser.add_argument("-w", "--workspace", required=True, help="workspace.yaml")
    parser.add_argument("-h", "--host", default="127.0.0.1", help="address to bind (default: %(default)s)")
    parser.add_argument("-p", "--port", type=int, default=3000, help="port (default: %(default)s)")
    parser.add_argument("--help", action="help")
    return parser


def daemon_command(workspace: str) -> list[str]:
    # The module `dagster dev` itself runs for the daemon.
    return [sys.executable, "-m", "dagster._daemon", "run", "-w", workspace, "--log-level", "warning"]


def _stop_when_daemon_dies(daemon: subprocess.Popen, stopping: threading.Event) -> None:
    code = daemon.wait()
    if not stopping.is_set():
        logging.getLogger("fair_pipeline.ui").error("dagster-daemon exited with code %s; stopping the webserver", code)
        os.kill(os.getpid(), signal.SIGTERM)


def main(argv: Sequence[str] | None = None) -> int:
    import uvicorn
    from dagster import DagsterInstance
    from dagster._core.workspace.context import WorkspaceProcessContext
    from dagster._core.workspace.load_target import WorkspaceFileTarget
    from dagster_webserver.app import create_app_from_workspace_process_context
    from dagster_webserver.version import __version__

    args = _parser().parse_args(argv)
    hosts = allowed_hosts_from_environment(args.host, args.port)
    daemon = subprocess.Popen(daemon_command(args.workspace))
    stopping = threading.Event()
    threading.Thread(target=_stop_when_daemon_dies, args=(daemon, stopping), daemon=True).start()
    try:
        with DagsterInstance.get() as instance, WorkspaceProcessContext(
            instance, version=__version__, workspace_load_target=WorkspaceFileTarget(paths=[args.workspace]),
        ) as context:
            app = create_app_from_workspace_process_context(context, "")
            uvicorn.run(DagsterGuard(app, hosts), host=args.host, port=args.port, log_level="warning")
    finally:
        stopping.set()
        if daemon.poll() is None:
            daemon.terminate()
            try:
                daemon.wait(timeout=20)
            except subprocess.TimeoutExpired:
                daemon.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
