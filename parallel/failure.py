"""When one rank fails, every rank stops within seconds, and says which rank failed and why.

What happens without this (gloo on CPU, measured on 2 ranks): a rank that raises or is killed in a training step
makes its peer's pending collective fail within about a second, but with gloo's words only ("Connection closed
by peer [127.0.0.1]:15529"), never the failed rank's number or error; and a peer that is not in a collective at
that moment (rank 0 computing the reference solution while the others wait, or writing outputs) learns nothing
until its next collective, minutes later; a machine that goes down silently leaves its peers waiting for the
process-group timeout (30 minutes).

The mechanism, on the store the ranks met through (``elecsolver.parallel.launch.rendezvous``), under the prefix
``elecsolver/`` (keys: ``beat/R``, ``error/R``, ``first``, ``bye/R``, ``left``):

- A rank whose run ends in an exception records a one-line summary of it (``error/R``, and ``first``, set once,
  first failure wins) before it leaves the process group (:meth:`Watchdog.retire`); its own traceback is
  printed as usual.
- Every rank runs a watchdog thread (a daemon, one store poll a second on a connection of its own): it bumps its
  heartbeat counter, looks for a recorded failure, and watches the heartbeat of the next rank in the ring.  A
  rank whose heartbeat stands still for ``ELECSOLVER_HEARTBEAT_TIMEOUT`` seconds (default 30) is recorded as
  failed on its behalf; a store that stops answering means the rank that hosts it (rank 0) is gone.
- When the watchdog learns of a failure it lets the main thread handle it for ``grace`` seconds (a pending
  collective fails by itself when the failed rank's connections close, and :func:`collective` turns that
  error into :class:`RankFailure`); if the main thread is busy elsewhere (a long computation), the watchdog
  prints ``elecsolver: rank R: stopping: rank K failed: <error>`` and ends the process with exit code 1.
- A collective that fails (:func:`collective`) asks the watchdog why: a recorded failure is named at once;
  without one (a rank killed by a signal), the watchdog compares every rank's heartbeat over 3 seconds and
  records the ranks that stood still as having died.

Timeouts, and where each applies:

- joining (the rendezvous and ``init_process_group``): the process-group timeout (``timeout_s``, 1800 s by
  default).  A rank that dies before it has joined is not seen here; the launchers end the job then (mpirun,
  torchrun and srun stop all ranks when one exits non-zero).
- a collective: the process-group timeout too, so a rank may wait that long for a peer that is alive but busy
  (the others wait at their first collective while rank 0 computes the reference solution, at the closing
  barrier while it writes the outputs).  Liveness is the watchdog's job, not the collectives' timeout.
- a failure: recorded errors are seen within about 1 s (poll) + ``grace`` (5 s) at most; a rank killed by a signal
  within about 5 s when the others are in a collective, else within ``heartbeat_timeout`` (30 s) + ``grace``; a
  lost store host within 2 polls (or 2 store timeouts of 10 s on a silent network).  All below 60 s.

The store host (rank 0 when the ranks met through its TCP store) keeps the store until every other rank has left
(:meth:`Watchdog.close`; at most 30 s after a clean run, 10 s after a failure), so that no rank loses the store
while it still reads a failure record or says goodbye.
"""

from __future__ import annotations

import atexit
import contextlib
import datetime
import logging
import os
import sys
import threading
import time

__all__ = ["RankFailure", "Watchdog", "collective", "current", "gloo_threads", "is_comm_error", "one_line",
           "start"]

log = logging.getLogger(__name__)

PREFIX = "elecsolver/"
_CURRENT: Watchdog | None = None


class RankFailure(RuntimeError):
    """Another rank failed (it raised, or it died), so this rank stops too.

    Attributes
    ----------
    rank : int or None
        The rank that failed first (None if it cannot be told, e.g. a broken file store).
    reason : str
        Its one-line error (``"RuntimeError: ..."``) or how it died.
    """

    def __init__(self, rank: int | None, reason: str):
        self.rank, self.reason = rank, reason
        super().__init__(f"rank {rank} failed: {reason}" if rank is not None else reason)

    def __reduce__(self):
        return type(self), (self.rank, self.reason)


def one_line(exc: BaseException, limit: int = 400) -> str:
    """``"Type: first line of the message"`` of an exception, at most ``limit`` characters."""
    text = str(exc).strip().splitlines()
    line = f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
    return line if len(line) <= limit else line[: limit - 3] + "..."


def gloo_threads() -> list[str]:
    """Names of this process's native threads that belong to a process group or a TCP store (Linux; else []).

    After :func:`~elecsolver.parallel.data_parallel.shutdown` there must be none: a process group that is still
    referenced somewhere is only destroyed at interpreter exit, where its worker threads abort the process
    (see :func:`~elecsolver.parallel.data_parallel.init_data_parallel`)."""
    names = []
    try:
        for tid in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{tid}/comm") as f:
                    name = f.read().strip()
            except OSError:
                continue
            if name.startswith(("pt_gloo", "gloo_", "pt_tcpstore", "pt_nccl")):
                names.append(name)
    except OSError:
        return []
    return sorted(names)


def current() -> Watchdog | None:
    """The watchdog of this process's run (None on one process or before the ranks have joined)."""
    return _CURRENT


def start(store, rank: int, world: int, store_host: int | None = None, **kwargs) -> Watchdog:
    """Start this process's watchdog over the job's ``store`` (see :class:`Watchdog`); it becomes :func:`current`."""
    global _CURRENT, _EXIT_HOOK
    if _CURRENT is not None:
        _CURRENT.close()
    if not _EXIT_HOOK:  # registered before the watchdog's own hook, so that it runs after it
        _EXIT_HOOK = True
        atexit.register(_free_groups_at_exit)
    _CURRENT = Watchdog(store, rank, world, store_host=store_host, **kwargs)
    _CURRENT.start()
    return _CURRENT


_EXIT_HOOK = False


def _free_groups_at_exit() -> None:
    """Before the interpreter's teardown: collect the garbage that may still hold process groups (e.g. a device
    mesh's subgroups in a reference cycle), so that their threads are joined while the interpreter still runs;
    a group destroyed by the teardown's own collection can abort the process (see ``init_data_parallel``)."""
    import gc

    # an uncaught exception's traceback (kept in sys.last_* for post-mortem debugging) holds the frames of the
    # failed run, and with them the groups its locals refer to
    for name in ("last_type", "last_value", "last_traceback", "last_exc"):
        if getattr(sys, name, None) is not None:
            setattr(sys, name, None)
    gc.collect()
    left = gloo_threads()
    if left:
        log.warning("process-group threads are still alive at exit (%s): a group is still referenced somewhere; "
                    "the interpreter's teardown may abort the process", ", ".join(left))


@contextlib.contextmanager
def collective():
    """Around a collective: if it fails because another rank failed, raise :class:`RankFailure` naming that
    rank and its error (chained to the backend's error); any other error passes unchanged."""
    try:
        yield
    except RuntimeError as exc:
        watch = _CURRENT
        if watch is None or isinstance(exc, RankFailure):
            raise
        failure = watch.explain()
        if failure is None:
            raise
        raise RankFailure(failure.rank, failure.reason) from exc


_COMM_WORDS = ("gloo", "nccl", "connection closed", "connection reset", "broken pipe", "socket", "timed out",
               "timeout", "peer")


def is_comm_error(exc: BaseException) -> bool:
    """Whether ``exc`` looks like a failed collective or store operation (a ``torch.distributed.DistError``, or a
    RuntimeError whose message speaks of gloo, NCCL, sockets, peers or timeouts)."""
    try:
        import torch.distributed as dist

        if isinstance(exc, dist.DistError):
            return True
    except (ImportError, AttributeError):
        pass
    return isinstance(exc, RuntimeError) and any(w in str(exc).lower() for w in _COMM_WORDS)


def _env_float(name: str, default: float) -> float:
    text = os.environ.get(name)
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{name}={text!r} is not a number of seconds") from None
    if not value > 0:
        raise ValueError(f"{name} must be positive, got {text}")
    return value


class Watchdog:
    """The failure record and the heartbeat of one rank (see the module docstring).

    Parameters
    ----------
    store : torch.distributed.Store
        The job's store (on the rank that hosts it, this object owns the server: it is kept until :meth:`close`).
    rank, world : int
    store_host : int, optional
        The rank whose process hosts the store (0 for the TCP store of ``rendezvous``; None for torchrun's agent
        store or a file store): losing the store then means losing that rank.
    interval : float
        Seconds between polls (default 1).
    heartbeat_timeout : float
        Seconds without a heartbeat after which a rank counts as dead (default 30, or the environment variable
        ``ELECSOLVER_HEARTBEAT_TIMEOUT``).
    grace : float
        Seconds the main thread is given to handle a failure itself before the watchdog ends the process.
    store_timeout : float
        Timeout of the watchdog's own store operations (a silent network).
    """

    def __init__(self, store, rank: int, world: int, *, store_host: int | None = None, interval: float = 1.0,
                 heartbeat_timeout: float | None = None, grace: float = 5.0, store_timeout: float = 10.0):
        import torch.distributed as dist

        self.rank, self.world, self.store_host = rank, world, store_host
        self.interval, self.grace = interval, grace
        self.heartbeat_timeout = heartbeat_timeout if heartbeat_timeout is not None else \
            _env_float("ELECSOLVER_HEARTBEAT_TIMEOUT", 30.0)
        self.failure: RankFailure | None = None
        self._raw = store  # keeps the server alive on the store host
        self._main = dist.PrefixStore(PREFIX, store)  # the main thread's operations
        try:
            own = store.clone()  # a connection of the watchdog's own, with a short timeout
            own.set_timeout(datetime.timedelta(seconds=store_timeout))
        except Exception:  # noqa: BLE001 (a store without clone(): share it; its operations are serialised)
            own = store
        self._own = dist.PrefixStore(PREFIX, own)
        self._stop = threading.Event()  # the thread ends
        self._closing = threading.Event()  # the main thread is leaving: no hard exit any more
        self._probe = threading.Event()  # the main thread asks: which rank died?
        self._found = threading.Event()
        self._thread: threading.Thread | None = None
        self._closed = self._left = False

    # the thread -------------------------------------------------------------------------------------
    def start(self) -> None:
        """Create this rank's heartbeat key and start the thread (before the first collective, so that every
        rank's key exists once any rank is past it)."""
        self._main.add(f"beat/{self.rank}", 1)
        self._thread = threading.Thread(target=self._run, name="elecsolver-watchdog", daemon=True)
        self._thread.start()
        atexit.register(self._at_exit)

    def _at_exit(self) -> None:
        # shutdown() was not called (a script without it, or an exception raised outside the try/finally that
        # calls it): record the uncaught exception, if any, for the other ranks; stop the thread before the
        # interpreter's teardown (a daemon thread that returns from a store call then would abort the process);
        # leave the group now, while the interpreter still runs (see _free_groups_at_exit); release the store
        exc = getattr(sys, "last_value", None)
        if exc is not None and not isinstance(exc, RankFailure) and self.failure is None:
            with contextlib.suppress(Exception):
                self._record(self._main, self.rank, one_line(exc))
        self.stop()
        with contextlib.suppress(Exception):
            self._leave(self._main)
        with contextlib.suppress(Exception):
            import torch.distributed as dist

            if dist.is_initialized():
                dist.destroy_process_group()
        self.close(clean=exc is None)

    def _run(self) -> None:
        succ = (self.rank + 1) % self.world
        last, since = None, time.monotonic()
        errors = 0
        while not self._stop.wait(self.interval):
            try:
                store = self._own
                store.add(f"beat/{self.rank}", 1)
                if not store.check(["first"]):
                    if self._probe.is_set():
                        self._find_dead(store)
                    elif succ != self.rank and store.check([f"beat/{succ}"]) and not store.check([f"bye/{succ}"]):
                        value = store.get(f"beat/{succ}")
                        now = time.monotonic()
                        if value != last:
                            last, since = value, now
                        elif now - since > self.heartbeat_timeout:
                            self._record(store, succ, f"stopped responding: no heartbeat for "
                                                      f"{self.heartbeat_timeout:.0f} s (killed, stuck in native code, "
                                                      "or its machine is down)")
                errors = 0
                if store.check(["first"]):
                    self._handle(self._read(store))
                    return
            except Exception as exc:  # noqa: BLE001 (the store does not answer: connection, timeout, protocol)
                if self._stop.is_set():
                    return
                errors += 1
                if errors >= 2:
                    self._handle(self._lost(exc))
                    return

    def _find_dead(self, store) -> None:
        """Record the ranks whose heartbeat stands still for 3 polls (and that did not say goodbye) as dead."""
        others = [j for j in range(self.world) if j != self.rank and store.check([f"beat/{j}"])]  # started
        keys = [f"beat/{j}" for j in others]
        self._probe.clear()  # one comparison per request
        before = store.multi_get(keys)
        if self._stop.wait(3 * self.interval):
            return
        after = store.multi_get(keys)
        for j, a, b in zip(others, before, after):
            if a == b and not store.check([f"bye/{j}"]):
                self._record(store, j, "died without reporting an error (killed by a signal, crashed in native "
                                       "code, or its machine went down)")
                return

    @staticmethod
    def _record(store, rank: int, reason: str) -> None:
        store.set(f"error/{rank}", reason)
        store.compare_set("first", "", str(rank))

    @staticmethod
    def _read(store) -> RankFailure:
        rank = int(store.get("first"))
        return RankFailure(rank, store.get(f"error/{rank}").decode(errors="replace"))

    def _handle(self, failure: RankFailure) -> None:
        self.failure = failure
        self._found.set()
        if self._closing.wait(self.grace):  # the main thread saw it (its collective failed) and is leaving
            return
        print(f"elecsolver: rank {self.rank}: stopping: {failure}", file=sys.stderr, flush=True)
        with contextlib.suppress(Exception):  # best effort: the store may be gone
            sys.stdout.flush()
            self._leave(self._own)
            if self.store_host == self.rank:
                self._linger(self._own, 10.0, clean=False)
        os._exit(1)  # the main thread is busy elsewhere (not in a collective that would fail by itself)

    # the main thread --------------------------------------------------------------------------------
    def explain(self, wait: float | None = None) -> RankFailure | None:
        """Why a collective failed: the failure the watchdog knows of or finds within ``wait`` seconds (default:
        enough for one heartbeat comparison), else None."""
        if self.failure is None and self._thread is not None and self._thread.is_alive():
            self._probe.set()
            self._found.wait(wait if wait is not None else 6 * self.interval + 2.0)
        return self.failure

    def retire(self, exc: BaseException | None = None) -> None:
        """Leave the watch: record ``exc`` as this rank's failure (unless it is the consequence of another rank's
        failure, which is then named on stderr), stop the thread and say goodbye.  Before ``destroy_process_group``."""
        self._closing.set()
        if exc is not None:
            failure = exc if isinstance(exc, RankFailure) else self.failure
            try:
                if failure is None:  # another rank's failure recorded already?
                    failure = self._recorded(self._main)
                if failure is None and is_comm_error(exc):  # a collective's error not turned into RankFailure
                    failure = self.explain()
                if failure is None:
                    self._record(self._main, self.rank, one_line(exc))
            except Exception as err:  # noqa: BLE001 (the store is gone: nothing to record into)
                if failure is None and is_comm_error(exc):
                    failure = self._lost(err)
                log.debug("could not record the failure: %s", err)
            if failure is not None and not isinstance(exc, RankFailure):
                print(f"elecsolver: rank {self.rank}: stopping: {failure}", file=sys.stderr, flush=True)
        self.stop()
        with contextlib.suppress(Exception):
            self._leave(self._main)

    def _lost(self, err: BaseException) -> RankFailure:
        if self.store_host is not None:
            return RankFailure(self.store_host, f"died: the rendezvous store it hosted stopped answering "
                                                f"({one_line(err, 160)})")
        return RankFailure(None, f"the rendezvous store stopped answering ({one_line(err, 160)}); a rank or the "
                                 "launcher's agent has failed")

    def _recorded(self, store) -> RankFailure | None:
        if store.check(["first"]):
            failure = self._read(store)
            if failure.rank != self.rank:
                return failure
        return None

    def stop(self) -> None:
        """Stop the thread and wait for it (it must not be in a store call when the interpreter exits)."""
        self._stop.set()
        self._closing.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=30)

    def close(self, clean: bool = True) -> None:
        """Release the store, the store host (see ``store_host``) after every other rank has left or
        ``30 s`` (clean run) / ``10 s`` (after a failure).  After ``destroy_process_group``."""
        global _CURRENT
        if self._closed:
            return
        self.stop()
        try:
            if self.store_host == self.rank:
                self._linger(self._main, 30.0 if clean else 10.0, clean)
        except Exception as err:  # noqa: BLE001 (a store error while waiting: stop waiting)
            log.debug("store host: %s", err)
        self._closed = True
        self._main = self._own = self._raw = None
        if _CURRENT is self:
            _CURRENT = None
        with contextlib.suppress(Exception):
            atexit.unregister(self._at_exit)

    def _leave(self, store) -> None:
        if not self._left:
            self._left = True
            store.set(f"bye/{self.rank}", "1")
            store.add("left", 1)

    def _linger(self, store, seconds: float, clean: bool) -> None:
        """On the store host: wait until the other ranks have left (after a failure: or died)."""
        deadline = time.monotonic() + seconds
        first = None
        while time.monotonic() < deadline:
            if int(store.add("left", 0)) >= self.world:
                return
            if not clean:
                if first is None and store.check(["first"]):
                    first = int(store.get("first"))
                if all(j == first or store.check([f"bye/{j}"]) for j in range(self.world)):
                    return
            time.sleep(0.1)
        log.debug("rank %d: not every rank left within %.0f s", self.rank, seconds)
