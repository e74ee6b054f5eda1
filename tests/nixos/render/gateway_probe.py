#!/usr/bin/env python3
"""The hive-gateway's nginx, as the module renders it, attacked with encoded paths: run by
check_hosts.py inside the unit's sandbox (its users and directories, a network of its own).

nginx matches `location` blocks against the normalized URI (percent-decoded, `.` and `..`
resolved) but, given a `proxy_pass` without a URI, forwards the request's raw URI. So
`PUT /api/secrets/..%2Fforge%2Fwebhook` matches the webhook's location, which SSO does not guard,
and would reach the secrets route. This starts the real nginx with the rendered configuration, a
recording stand-in for the controller on the socket the configuration names, and a stand-in SSO
endpoint that lets in only a request carrying the probe's session cookie, then sends each path
as-is: the controller may see the webhook's own path and nothing else.

The controller takes the SSO user and groups from nginx's `Remote-User` and `Remote-Groups`, so
those must come from the SSO endpoint's answer and never from the client: requests that send their
own (as an admin would be named) must reach the controller with the SSO endpoint's user behind SSO,
and with none on the webhook's location or without SSO.

    gateway_probe.py NGINX CONFIG

Prints what each request did; exits non-zero naming every request that reached another route or
carried a user the SSO endpoint did not name.
"""

import http.server
import os
import re
import socket
import socketserver
import subprocess
import sys
import threading
import time
from pathlib import Path

WEBHOOK = "/api/forge/webhook"
# The SSO stand-in's one user: a request with this cookie is signed in as it.
SESSION = "probe-session=1"
SSO_USER, SSO_GROUPS = "probe-user", "probe-group"
# What a client sends to pass for an admin.
FORGED = {"Remote-User": "admin", "Remote-Groups": "swarm-admins"}

# Each reaches the webhook's location after nginx normalizes it, but names another route raw.
ENCODED = [
    ("PUT", "/api/secrets/..%2Fforge%2Fwebhook"),
    ("POST", "/api/agents/alpha/prompts/..%2F..%2F..%2Fforge%2Fwebhook"),
    ("PUT", "/api/agents/alpha/state/..%2F..%2F..%2Fforge%2Fwebhook"),
    ("POST", "/api/forge/%77ebhook"),
    ("POST", "/api/forge/./webhook"),
    ("POST", "/api//forge/webhook"),
    ("POST", "/api/x/../forge/webhook"),
]


class Recorder(http.server.BaseHTTPRequestHandler):
    """The controller's stand-in: records the raw path of every request it is given, and the SSO
    user and groups it was named."""

    seen = []
    users = []

    def answer(self):
        Recorder.seen.append((self.command, self.path))
        Recorder.users.append((self.headers.get_all("Remote-User") or [], self.headers.get_all("Remote-Groups") or []))
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        self.send_response(200)
        self.send_header("Content-Length", "10")
        self.end_headers()
        self.wfile.write(b"controller")

    do_GET = do_POST = do_PUT = do_DELETE = answer

    def log_message(self, *args):
        pass


class Sso(http.server.BaseHTTPRequestHandler):
    """The SSO endpoint's stand-in: only the probe's session is signed in, as Authelia names a
    user (200 with Remote-User and Remote-Groups); anything else is 401."""

    def do_GET(self):
        if SESSION in (self.headers.get("Cookie") or ""):
            self.send_response(200)
            self.send_header("Remote-User", SSO_USER)
            self.send_header("Remote-Groups", SSO_GROUPS)
        else:
            self.send_response(401)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


class UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        # request() reads only the status line and hangs up: a late write failing is no finding.
        if not isinstance(sys.exc_info()[1], BrokenPipeError):
            super().handle_error(request, client_address)

    def get_request(self):
        request, _ = super().get_request()
        return request, ("unix", 0)


def serve(server):
    threading.Thread(target=server.serve_forever, daemon=True).start()


def request(port, method, path, headers=None):
    """`method path` sent as-is (no client normalizes it) with `headers` besides; the status
    line's code."""
    extra = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(f"{method} {path} HTTP/1.1\r\nHost: swarm\r\n{extra}Content-Length: 2\r\nConnection: close\r\n\r\n{{}}".encode())
        head = b""
        while b"\r\n" not in head:
            chunk = conn.recv(4096)
            if not chunk:
                break
            head += chunk
    return int(head.split(b" ", 2)[1]) if head else 0


def main():
    nginx, config = sys.argv[1], sys.argv[2]
    text = Path(config).read_text()
    socket_path = re.search(r"server unix:(\S+);", text).group(1)
    port = int(re.search(r"listen 0\.0\.0\.0:(\d+)", text).group(1))
    sso = re.search(r"proxy_pass http://127\.0\.0\.1:(\d+)/", text)

    Path(socket_path).parent.mkdir(parents=True, exist_ok=True)
    controller = UnixServer(socket_path, Recorder)
    os.chmod(socket_path, 0o666)
    serve(controller)
    if sso:
        serve(http.server.ThreadingHTTPServer(("127.0.0.1", int(sso.group(1))), Sso))

    proxy = subprocess.Popen([nginx, "-c", config], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proxy.poll() is not None or time.monotonic() > deadline:
                    sys.exit(f"gateway_probe: nginx did not come up: {proxy.stderr.read() if proxy.poll() is not None else 'timeout'}")
                time.sleep(0.05)

        breaches = []
        status = request(port, "POST", WEBHOOK)
        if Recorder.seen[-1:] != [("POST", WEBHOOK)]:
            breaches.append(f"POST {WEBHOOK} answered {status} and reached the controller as {Recorder.seen[-1:]}, not as itself")
        print(f"POST {WEBHOOK}: {status}, reached the controller as {Recorder.seen[-1][1]}")
        for method, path in ENCODED:
            before = len(Recorder.seen)
            status = request(port, method, path)
            reached = Recorder.seen[before:]
            print(f"{method} {path}: {status}, reached the controller as {[p for _, p in reached] or 'nothing'}")
            if any(seen_path != WEBHOOK for _, seen_path in reached):
                breaches.append(f"{method} {path} reached the controller as {reached}, past SSO")
        if sso:
            before = len(Recorder.seen)
            status = request(port, "GET", "/api/agents")
            if status != 302 or Recorder.seen[before:]:
                breaches.append(f"GET /api/agents without a session answered {status} and reached {Recorder.seen[before:]}")
            print(f"GET /api/agents without a session: {status} (to sign in)")

        # The SSO user only from the SSO endpoint's answer; a client's own never.
        signed_in = [("GET", "/api/agents", {**FORGED, "Cookie": SESSION}, ([SSO_USER], [SSO_GROUPS]) if sso else ([], []))]
        signed_in.append(("POST", WEBHOOK, FORGED, ([], [])))
        if not sso:
            signed_in.append(("GET", "/api/agents", FORGED, ([], [])))
        for method, path, headers, expected in signed_in:
            before = len(Recorder.users)
            status = request(port, method, path, headers)
            named = Recorder.users[before:]
            print(f"{method} {path} sending Remote-User: {FORGED['Remote-User']}: {status}, the controller was named {named or 'nothing'}")
            if named != [expected]:
                breaches.append(f"{method} {path} sending {FORGED} reached the controller naming {named}, not {expected}")
        if breaches:
            sys.exit("gateway_probe: " + "; ".join(breaches))
    finally:
        proxy.terminate()
        proxy.wait(timeout=10)


if __name__ == "__main__":
    main()
