"""Computations on a test's ``distributed`` cluster that fail instead of hanging.

A graph that does not finish within ``TIMEOUT`` seconds (the test's whole work takes
well under one on a 2-core machine) fails the test with what the scheduler holds and
what each worker's tasks were running, so a stuck cluster shows its cause rather than
holding the run until an outer time limit kills it without a word.
"""

from __future__ import annotations

import concurrent.futures

import pytest

TIMEOUT = 120.0  # seconds a test's graph may take
_ASK = 20.0  # seconds each question to a stuck cluster may take


def compute(client, graph, timeout: float = TIMEOUT):
    """``client.compute(graph, sync=True)`` (one collection or a list of them), or a
    test failure naming what the cluster was doing after ``timeout`` seconds."""
    from distributed import wait

    futures = client.compute(graph)
    try:
        wait(futures, timeout=timeout)
    except TimeoutError:
        pytest.fail(f"distributed: the graph did not finish within {timeout:g} s\n"
                    + stuck_report(client), pytrace=False)
    return client.gather(futures)


def stuck_report(client) -> str:
    """The scheduler's tasks in processing per worker and the call stacks of the tasks
    running on the workers, each asked for at most ``_ASK`` seconds."""
    lines = []
    pool = concurrent.futures.ThreadPoolExecutor(1)
    try:
        for name, ask in (("processing", client.processing), ("call stacks", client.call_stack)):
            try:
                lines.append(f"{name}: {pool.submit(ask).result(timeout=_ASK)!r}")
            except Exception as exc:  # the report must not hide the failure it explains
                lines.append(f"{name}: not answered ({type(exc).__name__}: {exc})")
    finally:
        pool.shutdown(wait=False)
    return "\n".join(lines)
