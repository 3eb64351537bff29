"""The C++ core's log lines, through Python's logging (logger "ddpio") instead of stderr.

The core appends its lines to a bounded queue; a daemon thread here takes them and logs them, so
they follow the application's logging configuration: with none, Python shows WARNING and above on
stderr and drops INFO (as any library's). Which lines the core produces at all is DDPIO_LOG_LEVEL's
choice (debug, info, warning, error; default info). Each record carries `ddpio_rank` and
`ddpio_where` ("module/file.cc:line"); its message starts with "rank N: " once the rank is known.
"""
import atexit
import logging
import os
import select
import threading
import time

from ddpio import _ddpio

logger = logging.getLogger("ddpio")
_lock = threading.Lock()
_thread = None


def _emit(records, dropped):
    for level, where, rank, message in records:
        if logger.isEnabledFor(level):
            text = f"rank {rank}: {message}" if rank >= 0 else message
            logger.log(level, "%s", text, extra={"ddpio_rank": rank, "ddpio_where": where})
    if dropped:
        logger.warning("%d log lines of the ddpio core were dropped (more than 10000 waiting)", dropped)


def _forward(wake):
    while True:
        if wake >= 0:
            try:
                select.select([wake], [], [])
            except (OSError, ValueError):
                return
        else:
            time.sleep(0.2)
        flush()


def flush():
    """Logs what the core has queued now (at exit, and for tests)."""
    records, dropped = _ddpio.take_log_records()
    _emit(records, dropped)


def start():
    """Forwards the core's lines from now on (idempotent; again in a forked child)."""
    global _thread
    with _lock:
        if _thread is not None and _thread.is_alive():
            return
        wake = _ddpio.forward_logs()
        _thread = threading.Thread(target=_forward, args=(wake,), name="ddpio-log", daemon=True)
        _thread.start()


def _after_fork():
    global _thread
    _thread = None
    start()


start()
atexit.register(flush)
os.register_at_fork(after_in_child=_after_fork)
