"""The ``fft`` extension: placeholder until the FFT work lands.

Every name of the standard's ``fft`` extension is absent from this module for now,
so ``hasattr(xp.fft, "fft")`` is False and conformance tools skip the extension
instead of calling a stub.
"""

__all__ = []
