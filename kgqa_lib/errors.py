"""Two kinds of error that are not a method's wrong answer.

* :class:`InfrastructureError` — the infrastructure failed (LLM endpoint unreachable/5xx/timeout
  after the client's retries, SPARQL endpoint down, replay miss, the embedded KG's on-disk store
  corrupted or unreadable). Not an answer: the runner leaves the question unanswered (no record),
  the next resume retries it, and the run exits non-zero. This is the one place that classifies
  them: ``llm.LLMEndpointError``, ``llm.ReplayMiss``, ``remote.EndpointError``,
  ``kg.graph.KGStoreError`` and :class:`StorageError` (the machine's own caches and run files:
  disk full, locked, read-only, damaged) derive from it. Code that turns exceptions into data (a method's
  feedback loop) must let it through: ``except InfrastructureError: raise`` before a broad
  ``except Exception``. What stays a scored answer: anything about the question or the LLM's
  output — unparseable output, an empty result, a rejected or timed-out LLM-written query
  (``kg.QueryTimeout``), an HTTP 400 from the LLM endpoint (e.g. a prompt over the context length).
* :class:`UserError` — a bad command, setting, file or setup that the user fixes. ``kgqa`` shows
  it as one line on stderr (``error: …``, exit code 2), never as a traceback, so each message says
  what is wrong and what to do. Subclasses also derive from the builtin type callers already catch
  (``ValueError``, ``FileNotFoundError``, ``RuntimeError``).
"""

from __future__ import annotations


class InfrastructureError(Exception):
    """The infrastructure (not the method) failed; ``short()`` is a one-line reason for a run's
    summary ("LLM endpoint http://… unreachable"). ``stops_run``: the runner stops at the first one
    (a fault of this machine, which the next question would meet again) instead of after a few in a row."""

    stops_run = False

    def __init__(self, message: str = "", *, summary: str | None = None) -> None:
        super().__init__(message)
        self.summary = summary

    def short(self) -> str:
        if self.summary:
            return self.summary
        text = str(self).strip()
        return text.splitlines()[0] if text else type(self).__name__


class UserError(Exception):
    """A problem with the command, the settings, the data or the setup that the user fixes."""


class UsageError(UserError, ValueError):
    """A command-line argument or parameter that cannot be used as given."""


class SetupError(UserError, RuntimeError):
    """The machine's setup cannot serve the command (a cache folder that is a file, no API key...)."""


class StorageError(InfrastructureError, RuntimeError):
    """One of the machine's own files cannot be used: an LLM, embedding or SPARQL cache, a transcript,
    a run file — the disk is full or over quota, the file or its folder is read-only, another process
    holds it locked beyond the busy timeout, an I/O error, or a cache is damaged beyond repair. Not
    an answer; the run stops at once (the message says what to do) and the next resume retries.
    Recognised in one place: :func:`kgqa_lib._sqlite.storage_failure`."""

    stops_run = True
