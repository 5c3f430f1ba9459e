"""examples/tour.py (the README's first command) runs its four jobs on every loaded device
and prints one table; run in a subprocess as a user would."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import tessera_array as xp

TOUR = Path(__file__).resolve().parent.parent / "examples" / "tour.py"
JOBS = ("cg Poisson", "fft 128 x 4096", "attention fwd+bwd", "adam step")


def test_tour_runs_every_job_on_every_device():
    env = dict(os.environ)
    env.pop("TESSERA_DEVICE", None)
    proc = subprocess.run([sys.executable, str(TOUR)], capture_output=True, text=True,
                          check=False, timeout=300, env=env, cwd=TOUR.parent)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("job "))
    assert re.split(r"\s{2,}", lines[head]) == ["job", "device", "check", "tessera", "peer",
                                                "peer time"]
    body = [re.split(r"\s{2,}", line) for line in lines[head + 2:] if line.strip()]
    devices = [str(d) for d in xp.__array_namespace_info__().devices()]
    for job in JOBS:
        seen = sorted(row[1] for row in body if row[0].startswith(job))
        assert seen == sorted(devices), (job, seen)
    for row in body:
        assert len(row) == 6, row
        assert re.fullmatch(r"\d+\.\d\d ms", row[3]) and re.fullmatch(r"\d+\.\d\d ms", row[5])
        assert re.match(r"rel \d\.\de[-+]\d\d vs ", row[2]), row
        if row[0].startswith("attention"):
            assert row[2].endswith("mask = cpu's"), row
