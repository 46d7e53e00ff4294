"""llama.cpp's server (`xllamacpp`) in a child process of its own, which lives as long as its parent holds it.

Not in the worker: xllamacpp loads a model holding the GIL, and for the 5-15 s of the load every other thread
of the worker stood still, /healthz and every turn included (a reload's new workers answered nothing).
The child reads its settings as one JSON line on stdin, answers "address URL" (or "error WHY") on stdout, and
exits when its stdin closes: when the parent stops it, or dies.
"""
from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time


class LlamaProcess:
    """One llama.cpp server process; `address` once started."""

    def __init__(self, spec: dict, timeout: float):
        self.address = ""
        # this file, by path, and -P (its folder not on sys.path): the child imports xllamacpp, not funes
        self._proc = subprocess.Popen([sys.executable, "-P", __file__], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, text=True, encoding="utf-8")
        try:
            self._proc.stdin.write(json.dumps(spec) + "\n")
            self._proc.stdin.flush()
            kind, said = _answer(self._proc, timeout)
        except BaseException:
            self.stop()
            raise
        if kind != "address":
            self.stop()
            raise RuntimeError(said or f"llama.cpp's process exited with {self._proc.returncode}")
        self.address = said
        self._proc.stdout.close()  # the child's stdout now goes to its stderr

    def stop(self, wait: float = 10.0) -> None:
        """Close its stdin (it exits, freeing the model), and kill it if it has not within `wait` seconds."""
        try:
            self._proc.stdin.close()
        except OSError:
            pass
        try:
            self._proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


def _answer(proc: subprocess.Popen, timeout: float) -> tuple[str, str]:
    """("address", its URL) or ("error", why) from the child; ("", "") if it exits first; TimeoutError after
    `timeout` seconds. Lines llama.cpp itself may print are skipped."""
    deadline = time.monotonic() + timeout
    while True:
        if not select.select([proc.stdout], [], [], 0.5)[0]:
            if time.monotonic() > deadline:
                raise TimeoutError(f"llama.cpp did not start within {timeout:.0f} s")
            continue
        line = proc.stdout.readline()
        if not line:
            proc.wait()
            return "", ""
        kind, _, said = line.strip().partition(" ")
        if kind in ("address", "error"):
            return kind, said


def _params(xllamacpp, spec: dict):
    params = xllamacpp.CommonParams()
    params.model.path = spec["model"]
    params.n_ctx = spec["n_ctx"]
    params.n_parallel = spec["n_parallel"]
    params.n_batch = spec["n_batch"]
    params.cpuparams.n_threads = spec["threads"]
    params.cpuparams_batch.n_threads = spec["threads"]
    params.hostnames = ["127.0.0.1"]
    params.port = spec["port"]
    params.use_jinja = True  # the model's own chat template renders tools
    params.verbosity = 0
    return params


def main() -> int:
    """The child: start the server, print its address (or the error, on one line), serve until stdin closes."""
    try:
        import xllamacpp

        server = xllamacpp.Server(_params(xllamacpp, json.loads(sys.stdin.readline())))
    except Exception as e:  # noqa: BLE001  (any failure is the parent's to report, as one line)
        print("error", f"{type(e).__name__}: {e}".replace("\n", " "), flush=True)
        return 1
    print("address", server.listening_address, flush=True)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # what llama.cpp prints later must not fill a pipe no one reads
    sys.stdin.read()  # until the parent closes it, or exits
    del server  # dropping the Server joins llama.cpp's threads
    return 0


if __name__ == "__main__":
    sys.exit(main())
