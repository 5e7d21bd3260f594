# SPDX-License-Identifier: Apache-2.0
"""Testing against the real thing: :class:`InlineClient` starts a kvq server of the test's
own (``kvq serve --ephemeral``: an LMDB store in a new temporary directory, a free loopback
port) and is a :class:`kvq.Client` of it; :meth:`InlineClient.close` stops the server, which
removes that directory::

    with kvq.testing.InlineClient() as client:     # kvq from $KVQ_BIN, else on $PATH
        client.put_type("email", timeout=30, max_attempts=3)
        worker = kvq.Worker(client)

        @worker.handler("email")
        def send(job):
            return {"sent_to": job.data["to"]}

        client.add("email", "welcome-1", {"to": "ada@example.com"})
        assert worker.drain() == 1                  # ran the due jobs, in this thread
        assert client.get("email", "welcome-1")["result"] == {"sent_to": "ada@example.com"}

Everything runs as in production, in real time: give a test's types a short backoff
(``backoff={"base": 0.01}``) so that ``worker.drain(run_scheduled=True)`` soon runs the
retries. (Before 0.2.0 this class was an in-memory imitation of a server with a clock of its
own; it is now the server itself.)
"""

import os
import re
import shutil
import signal
import subprocess
import threading
import weakref
from typing import Any, Optional, Sequence

from .client import Client

__all__ = ["InlineClient", "find_kvq"]

# The first line `kvq serve --ephemeral` prints (docs/operations.md, A throwaway server).
_LISTENING = re.compile(r"^kvq serve: listening on (https?://\S+) store lmdb:(\S+)")


def find_kvq(kvq_bin: Optional[str] = None) -> str:
    """The kvq binary: ``kvq_bin`` if given, else ``$KVQ_BIN``, else ``kvq`` on ``$PATH``.
    Raises :class:`FileNotFoundError` saying what it tried."""
    if kvq_bin:
        source = "kvq_bin"
    else:
        kvq_bin, source = os.environ.get("KVQ_BIN", ""), "$KVQ_BIN"
    if kvq_bin:
        if not os.access(kvq_bin, os.X_OK):
            raise FileNotFoundError("the kvq binary %s names (%s) is not an executable file"
                                    % (source, kvq_bin))
        return kvq_bin
    found = shutil.which("kvq")
    if found is None:
        raise FileNotFoundError("no kvq binary: pass kvq_bin=, set $KVQ_BIN, or put kvq on $PATH")
    return found


def _stop(proc: "subprocess.Popen[bytes]") -> None:
    """SIGTERM, then SIGKILL after 10 s; the server removes its directory on SIGTERM."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class InlineClient(Client):
    """A :class:`kvq.Client` bound to a ``kvq serve --ephemeral`` it starts: every call of
    the client, with the server's own answers. Stop it with :meth:`close` (or use it as a
    context manager); one still running when the interpreter exits is stopped then
    (``weakref.finalize`` runs at exit).

    Args:
        kvq_bin: the kvq binary (default ``$KVQ_BIN``, else ``kvq`` on ``$PATH``).
        args: more ``kvq serve`` flags (``["--token", t]``: then pass ``token=t`` too).
        token: the client's token, for a server started with ``--token``.
        timeout: the client's request timeout (seconds).
        start_timeout: seconds the server may take to say where it listens.

    Raises :class:`FileNotFoundError` without a binary, and :class:`RuntimeError` with the
    server's output if it does not start.
    """

    def __init__(self, kvq_bin: Optional[str] = None, *, args: Sequence[str] = (),
                 token: Optional[str] = None, timeout: float = 30,
                 start_timeout: float = 30) -> None:
        binary = find_kvq(kvq_bin)
        env = dict(os.environ)
        env.pop("KVQ_TOKEN", None)  # the test's environment's token is not this server's
        proc = subprocess.Popen([binary, "serve", "--ephemeral", *args],
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, env=env)
        output = []  # its lines, for error messages
        self._proc, self._output = proc, output
        first = threading.Event()
        found = {}

        def pump() -> None:
            # Reads its output to the end, so the server never blocks writing it. It holds
            # no reference to self, so a client dropped without close() is still finalized.
            with proc.stdout:
                for raw in proc.stdout:
                    line = raw.decode(errors="replace").rstrip("\n")
                    if len(output) < 1000:
                        output.append(line)
                    if not first.is_set():
                        m = _LISTENING.match(line)
                        if m:
                            found["url"], found["dir"] = m.group(1), m.group(2)
                        first.set()
            first.set()

        threading.Thread(target=pump, daemon=True, name="kvq-inline-output").start()
        self._finalizer = weakref.finalize(self, _stop, self._proc)
        if not first.wait(start_timeout) or "url" not in found:
            self.close()
            raise RuntimeError("%s serve --ephemeral did not say where it listens within %g s; "
                               "its output:\n%s" % (binary, start_timeout, self.output()))
        self.data_dir: str = found["dir"]
        super().__init__(found["url"], token=token, timeout=timeout)

    def output(self) -> str:
        """What the server printed so far (its first 1,000 lines)."""
        return "\n".join(self._output)

    def close(self) -> None:
        """Stop the server and wait for it to exit; its data directory is gone by then.
        Closing twice does nothing."""
        self._finalizer()

    @property
    def closed(self) -> bool:
        """Whether the server has stopped."""
        return self._proc.poll() is not None

    def __enter__(self) -> "InlineClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
