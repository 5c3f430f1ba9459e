"""A plain-text progress bar on stderr (no dependency).

On a terminal the bar redraws in place; in a log (stderr not a TTY) each step is
one line, so CI output stays readable.
"""

from __future__ import annotations

import sys
import time

__all__ = ["Progress"]


class Progress:
    """Shows ``[=====>    ] 7/21  12.3s  overhead/sum[n=1000]`` while a run proceeds."""

    def __init__(self, total: int, *, stream=None, enabled: bool = True, width: int = 24):
        self.total = total
        self.stream = sys.stderr if stream is None else stream
        self.enabled = enabled and total > 0
        self.width = width
        self.count = 0
        self._t0 = time.perf_counter()
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._last_len = 0

    def step(self, label: str) -> None:
        """Announce the next item (called before it starts)."""
        self.count += 1
        if not self.enabled:
            return
        done = self.count - 1
        filled = int(self.width * done / self.total)
        bar = "=" * filled + (">" if filled < self.width else "") + " " * (self.width - filled - 1)
        elapsed = time.perf_counter() - self._t0
        line = f"[{bar[: self.width]}] {self.count}/{self.total} {elapsed:6.1f}s  {label}"
        if self._tty:
            pad = " " * max(0, self._last_len - len(line))
            self.stream.write("\r" + line + pad)
            self._last_len = len(line)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def close(self) -> None:
        """Finish the bar with the total elapsed time."""
        if not self.enabled:
            return
        elapsed = time.perf_counter() - self._t0
        line = f"[{'=' * self.width}] {self.total}/{self.total} {elapsed:6.1f}s  done"
        if self._tty:
            pad = " " * max(0, self._last_len - len(line))
            self.stream.write("\r" + line + pad + "\n")
        else:
            self.stream.write(line + "\n")
        self.stream.flush()
