"""The write API (issue 36): `hermes serve --http`'s resident memory and start-up with the write
API on and off, and a remote pause's round trip to every reader.

1. Memory: a real `hermes serve --http 127.0.0.1:0` (the installed `hermes`), plain and with
   `--http-write` (a token created first), after it announced it serves and answered a first
   round of requests (the page, /api/v1/status, and with the API on one pause and one lift):
   VmRSS from /proc. `SERVE_SAMPLES` processes each; the median. Start-up: from spawn to the
   "http: serving" line.
2. Round trip: `READERS` reader processes poll `Estop.gate()` on the fleet's file store (a
   tight loop, 1 ms apart) and print `time.monotonic()` (system-wide on Linux) when they first
   see the hold; a pause is a POST /api/v1/holds on loopback with a bearer token. The round
   trip is from before the POST until the LAST reader saw the hold (a token per 10 rounds: the
   API allows a burst of 30 writes per token, then one a second); the baseline is the same
   with the pause armed in-process (`Estop.engage`, what `hermes pause` does without its
   start-up). p50 and p99 over `ROUNDS`.

Run: `python bench/run.py --only api` (`--quick`: fewer rounds), or `python bench/api.py [--quick]`.
"""

from __future__ import annotations

import http.client
import json
import os
import select
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from core import _script
from harness import Figure, percentile

READERS = 8
SERVE_SAMPLES = 3
READER = """
import sys, time
from hermes_estop import Estop
estop = Estop()
held = False
print("ready", flush=True)
while True:
    now_held = not estop.gate()
    if now_held != held:
        held = now_held
        print(("held " if held else "free ") + repr(time.monotonic()), flush=True)
    time.sleep(0.001)
"""


def _env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")}
    env.update(HERMES_HOME=str(root), HERMES_ROOT=str(root))
    return env


def _token(root: Path) -> str:
    return subprocess.run([_script("hermes"), "tokens", "create", f"bench{time.monotonic_ns()}", "--role", "admin"],
                          env=_env(root), capture_output=True, text=True, check=True).stdout.strip()


def _start(root: Path, write: bool) -> tuple[subprocess.Popen[str], int, float]:
    args = [_script("hermes"), "serve", "--http", "127.0.0.1:0", *(["--http-write"] if write else [])]
    started = time.monotonic()
    process = subprocess.Popen(args, env=_env(root), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    for line in process.stderr:
        if "http: serving" in line:
            port = int(line.split(" on ", 1)[1].split(" ", 1)[0].rstrip("/").rsplit(":", 1)[1])
            return process, port, time.monotonic() - started
    raise RuntimeError("hermes serve did not start")


def _call(port: int, method: str, path: str, token: str | None = None, body: object = None) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    conn.request(method, path, body=json.dumps(body).encode() if body is not None else None, headers=headers)
    response = conn.getresponse()
    data = response.read()
    conn.close()
    return response.status, data


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def _serve_memory(root: Path, write: bool, token: str) -> tuple[float, float]:
    process, port, startup = _start(root, write)
    try:
        _call(port, "GET", "/")
        if write:
            _call(port, "GET", "/api/v1/status", token)
            _call(port, "POST", "/api/v1/holds", token, {"reason": "bench"})
            _call(port, "DELETE", "/api/v1/holds/fleet", token)
        time.sleep(1.0)
        return _rss_kib(process.pid) / 1024, startup
    finally:
        process.terminate()
        process.wait(timeout=60)


class Readers:
    def __init__(self, root: Path, count: int) -> None:
        self.processes = [subprocess.Popen([sys.executable, "-c", READER], env=_env(root), stdout=subprocess.PIPE,
                                           text=True) for _ in range(count)]
        for process in self.processes:
            assert process.stdout is not None and process.stdout.readline().strip() == "ready"

    def wait_all(self, state: str, timeout: float = 60.0) -> float:
        """The latest instant at which a reader reported `state`."""
        latest = 0.0
        deadline = time.monotonic() + timeout
        for process in self.processes:
            assert process.stdout is not None
            while True:
                ready, _, _ = select.select([process.stdout], [], [], max(0.0, deadline - time.monotonic()))
                if not ready:
                    raise TimeoutError(f"a reader never saw {state}")
                word, stamp = process.stdout.readline().split()
                if word == state:
                    latest = max(latest, float(stamp))
                    break
        return latest

    def close(self) -> None:
        for process in self.processes:
            process.kill()
            process.wait()


def _round_trips(root: Path, port: int, tokens: list[str], rounds: int) -> tuple[list[float], list[float]]:
    """`rounds` remote and in-process pauses; each token makes 10 rounds (20 writes: within the
    API's burst of 30 writes per token, so no round waits on the rate limit)."""
    from hermes_estop import Estop

    estop = Estop(home=root, root=root)
    readers = Readers(root, READERS)
    remote, local = [], []
    try:
        for index in range(rounds):
            token = tokens[index // 10]
            started = time.monotonic()
            status, _ = _call(port, "POST", "/api/v1/holds", token, {"reason": "bench"})
            assert status == 201
            remote.append((readers.wait_all("held") - started) * 1000)
            _call(port, "DELETE", "/api/v1/holds/fleet", token)
            readers.wait_all("free")
            started = time.monotonic()
            estop.engage(reason="bench", fleet=True)
            local.append((readers.wait_all("held") - started) * 1000)
            estop.release(fleet=True)
            readers.wait_all("free")
    finally:
        readers.close()
    return remote, local


def run(quick: bool) -> list[Figure]:
    rounds = 10 if quick else 100
    figures = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        token = _token(root)
        off = [_serve_memory(root, False, token) for _ in range(SERVE_SAMPLES)]
        on = [_serve_memory(root, True, token) for _ in range(SERVE_SAMPLES)]
        rss_off, rss_on = statistics.median(m for m, _ in off), statistics.median(m for m, _ in on)
        figures.append(Figure("hermes serve --http resident set, write API on (median)", rss_on, "MiB",
                              "write API off", rss_off, rss_on / rss_off, "within 10% of off",
                              rss_on <= rss_off * 1.10, {"samples_on": [m for m, _ in on], "samples_off": [m for m, _ in off]}))
        up_off, up_on = statistics.median(s for _, s in off), statistics.median(s for _, s in on)
        figures.append(Figure("hermes serve --http start-up to serving, write API on (median)", up_on * 1000, "ms",
                              "write API off", up_off * 1000, up_on / up_off, "", None))
        process, port, _ = _start(root, True)
        try:
            remote, local = _round_trips(root, port, [_token(root) for _ in range(0, rounds, 10)], rounds)
        finally:
            process.terminate()
            process.wait(timeout=60)
        for pct in (50, 99):
            figures.append(Figure(f"remote pause (POST /api/v1/holds, loopback) seen by all {READERS} readers, p{pct}",
                                  percentile(remote, pct), "ms", "in-process Estop.engage", percentile(local, pct),
                                  percentile(remote, pct) / percentile(local, pct), "p99 < 100 ms" if pct == 99 else "",
                                  percentile(remote, pct) < 100 if pct == 99 else None, {"rounds": rounds}))
    return figures


if __name__ == "__main__":
    for figure in run("--quick" in sys.argv):
        print(json.dumps(figure.to_json()))
