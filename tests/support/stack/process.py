"""One process of the stack: started in a process group of its own, logging to a file, stopped for good.

Every process of a stack, and everything it forks, carries ``CONVEYOR_STACK_COMPONENT`` in its
environment. Airflow's task supervisor puts each task process in a process group of its own, so
signalling a worker's group alone would leave its running tasks behind as orphans; finding the
processes by that variable reaches all of them, whatever their group or parent.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import psutil

from tests.support.stack.polling import StackError, wait_until

COMPONENT_VAR = "CONVEYOR_STACK_COMPONENT"


def marked_processes(marker: str) -> Iterator[psutil.Process]:
    """Live (not zombie) processes of a stack (``marker`` = its id) or of one component (``id/name``).

    :param marker: the stack id, or ``"<stack id>/<component>"``.
    """
    own = os.getpid()
    for proc in psutil.process_iter():
        try:
            if proc.pid == own or proc.status() == psutil.STATUS_ZOMBIE:
                continue
            found = proc.environ().get(COMPONENT_VAR, "")
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        if found == marker or found.startswith(marker + "/"):
            yield proc


def _kill_all(procs: Sequence[psutil.Process]) -> None:
    for proc in procs:
        try:
            proc.send_signal(signal.SIGKILL)
        except psutil.Error:
            pass


class Component:
    """A child process of the stack with its own process group, cwd, environment and log file.

    :param stack_id: the stack's id (part of the process marker).
    :param name: the component's name (``scheduler``, ``w1``...), unique in its stack.
    :param argv: the command.
    :param env: its whole environment (the marker is added).
    :param cwd: its working directory.
    :param log_path: stdout and stderr go here (appended to across restarts).
    """

    def __init__(
        self, stack_id: str, name: str, argv: Sequence[str], *, env: Mapping[str, str], cwd: Path, log_path: Path
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.marker = f"{stack_id}/{name}"
        self.env = {**env, COMPONENT_VAR: self.marker}
        self.cwd = cwd
        self.log_path = log_path
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start the process (returns at once; readiness is checked by the stack)."""
        self.cwd.mkdir(parents=True, exist_ok=True)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            log.write(f"=== {time.strftime('%H:%M:%S')} start: {' '.join(self.argv)}\n".encode())
            log.flush()
            self._process = subprocess.Popen(
                self.argv, env=self.env, cwd=self.cwd, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True,
            )

    @property
    def pid(self) -> int:
        assert self._process is not None, f"{self.name} was never started"
        return self._process.pid

    def returncode(self) -> int | None:
        """None while the process runs, else its exit status."""
        return None if self._process is None else self._process.poll()

    def check_running(self) -> None:
        """Raise :class:`StackError` with the log tail when the process has exited."""
        code = self.returncode()
        if code is not None:
            raise StackError(f"{self.name} exited with {code}; last lines of {self.log_path}:\n{self.tail()}")

    def tail(self, lines: int = 60) -> str:
        """The last ``lines`` lines of the component's log."""
        try:
            with self.log_path.open("rb") as log:
                log.seek(0, os.SEEK_END)
                log.seek(max(0, log.tell() - 200 * lines))
                text = log.read().decode(errors="replace")
        except FileNotFoundError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def processes(self) -> list[psutil.Process]:
        """Every live process of this component: the main one, its forks, the task processes."""
        return list(marked_processes(self.marker))

    def kill(self) -> None:
        """SIGKILL the component and everything it started, at once (a machine that dies)."""
        if self._process is not None and self._process.poll() is None:
            try:
                os.killpg(self._process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        _kill_all(self.processes())
        self._reap(timeout=15)

    def terminate(self) -> None:
        """Send SIGTERM to the process group (returns at once)."""
        if self._process is not None and self._process.poll() is None:
            try:
                os.killpg(self._process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    def stop(self, grace: float = 20) -> None:
        """SIGTERM the process group, wait up to ``grace`` seconds, then SIGKILL whatever is left."""
        self.terminate()
        if self._process is not None:
            try:
                self._process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                pass
        self.kill()

    def _reap(self, timeout: float) -> None:
        if self._process is not None:
            try:
                self._process.wait(timeout=timeout)
            except subprocess.TimeoutExpired as exc:
                raise StackError(f"{self.name} (pid {self.pid}) survived SIGKILL") from exc

        def gone() -> bool:
            left = self.processes()
            _kill_all(left)
            return not left

        wait_until(gone, timeout=timeout, what=f"every process of {self.name} to exit")
