"""Run the official Array API test suite (data-apis/array-api-tests) on tessera_array.

Usage::

    ARRAY_API_TESTS_DIR=/path/to/array-api-tests \\
        python conformance/run_official.py [--backend numpy] [--device cpu] \\
        [--max-examples 20] [--seed 0] [--xfails-file FILE] [PATH ...] [-- PYTEST-ARGS]

``PATH`` defaults to ``array_api_tests`` (the whole suite); give files such as
``array_api_tests/test_creation_functions.py`` to run part of it. The device is
bound for the suite through ``ARRAY_API_TESTS_MODULE=exec('...')`` calling
``set_default_device``; plain ``ARRAY_API_TESTS_MODULE=tessera_array`` is used
when the device is already the default.

The xfails file (default ``conformance/xfails-<backend>.txt``) holds one test id a
line followed by ``# reason``; blank and ``#`` lines are comments. Every id must
carry a reason. The comments are stripped into a temporary file that the suite's
``--xfails-file`` understands.

Prints ``N passed, N failed, ...`` and exits with pytest's exit status.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

HERE = pathlib.Path(__file__).resolve().parent
DIR_ENV = "ARRAY_API_TESTS_DIR"


class RunnerError(Exception):
    """A problem with the runner's inputs; the message says what to do."""


def parse_xfails(text: str, source: str = "xfails file") -> list:
    """Test ids from the xfails format (``<id>  # <reason>``); RunnerError for an id
    without a reason."""
    ids = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        test_id, sep, reason = _split_comment(line)
        if not sep or not reason.strip():
            raise RunnerError(
                f"{source}:{number}: every xfail needs a reason: '<test id>  # <reason>'. "
                f"Received: {raw!r}"
            )
        ids.append(test_id)
    return ids


def _split_comment(line: str):
    # A comment starts at a '#' preceded by whitespace (test ids hold no such thing).
    for i, ch in enumerate(line):
        if ch == "#" and i > 0 and line[i - 1] in " \t":
            return line[:i].rstrip(), "#", line[i + 1:]
    return line, "", ""


def resolve_device(backend: str | None, device: str | None):
    """(device string, is it the default device) for the requested backend/device."""
    from tessera_array import _devices, _discovery

    if device is not None:
        dev = _devices.as_device(device, "run_official")
        if backend is not None and dev.backend.name != backend:
            raise RunnerError(
                f"run_official: device {dev} belongs to backend {dev.backend.name!r}, not "
                f"{backend!r}. Received: --backend={backend} --device={device}"
            )
    elif backend is not None:
        loaded = _discovery.loaded_backends()
        if backend not in loaded:
            reasons = {name: reason for name, _, reason in _discovery.backend_status()}
            why = reasons.get(backend, "no backend of that name is known")
            raise RunnerError(f"run_official: backend {backend!r} is not loaded: {why}")
        dev = loaded[backend].devices()[0]
    else:
        dev = _devices.default_device()
    return str(dev), dev is _devices.default_device()


def module_spec(device: str, is_default: bool) -> str:
    """The ``ARRAY_API_TESTS_MODULE`` value binding ``device``."""
    if is_default:
        return "tessera_array"
    return f"exec('import tessera_array as xp; xp.set_default_device(\"{device}\")')"


def count_junit(path) -> dict:
    """Outcome counts from a pytest junit XML file."""
    counts = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0, "xfailed": 0}
    root = ET.parse(path).getroot()
    for case in root.iter("testcase"):
        tags = {child.tag: child for child in case}
        if "failure" in tags:
            counts["failed"] += 1
        elif "error" in tags:
            counts["errors"] += 1
        elif "skipped" in tags:
            kind = tags["skipped"].get("type", "")
            counts["xfailed" if "xfail" in kind else "skipped"] += 1
        else:
            counts["passed"] += 1
    return counts


def format_counts(counts: dict) -> str:
    return ", ".join(f"{n} {k}" for k, n in counts.items())


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1:]
    parser = argparse.ArgumentParser(
        prog="run_official.py",
        description="Run data-apis/array-api-tests on tessera_array "
                    f"(the checkout is given by ${DIR_ENV}).",
    )
    parser.add_argument("paths", nargs="*", default=["array_api_tests"],
                        help="suite paths relative to the checkout (default: array_api_tests)")
    parser.add_argument("--backend", help="run on the first device of this backend")
    parser.add_argument("--device", help="run on this device (e.g. cpu, cuda:0)")
    parser.add_argument("--max-examples", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0, help="--hypothesis-seed")
    parser.add_argument("--xfails-file",
                        help="default: conformance/xfails-<backend>.txt beside this script")
    args = parser.parse_args(argv)
    try:
        return _run(args, extra)
    except RunnerError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


def _run(args, extra) -> int:
    suite = os.environ.get(DIR_ENV)
    if not suite:
        raise RunnerError(
            f"run_official: set {DIR_ENV} to a checkout of "
            f"https://github.com/data-apis/array-api-tests (cloned with --recurse-submodules, "
            f"so that array-api/ is there). Received: {DIR_ENV} unset"
        )
    suite = pathlib.Path(suite).expanduser().resolve()
    if not (suite / "array_api_tests").is_dir():
        raise RunnerError(
            f"run_official: {suite} holds no array_api_tests/ folder; {DIR_ENV} must be the "
            f"root of an array-api-tests checkout. Received: {DIR_ENV}={suite}"
        )
    device, is_default = resolve_device(args.backend, args.device)
    from tessera_array import _devices

    backend = args.backend or _devices.as_device(device).backend.name
    xfails = pathlib.Path(args.xfails_file) if args.xfails_file else (
        HERE / f"xfails-{backend}.txt")
    ids = parse_xfails(xfails.read_text(), str(xfails)) if xfails.exists() else []
    env = dict(os.environ)
    env["ARRAY_API_TESTS_MODULE"] = module_spec(device, is_default)
    with tempfile.TemporaryDirectory(prefix="tessera-aat-") as tmp:
        ids_file = pathlib.Path(tmp) / "xfails.txt"
        ids_file.write_text("".join(f"{i}\n" for i in ids))
        junit = pathlib.Path(tmp) / "junit.xml"
        cmd = [
            sys.executable, "-m", "pytest", *args.paths,
            "--max-examples", str(args.max_examples),
            "--hypothesis-seed", str(args.seed),
            "--xfails-file", str(ids_file),
            "--junitxml", str(junit),
            "-p", "no:cacheprovider",
            *extra,
        ]
        if not _devices.as_device(device).backend.is_host:
            # A device backend builds each kernel on its first call, which outlasts
            # Hypothesis' per-example deadline; results are unaffected.
            cmd.insert(cmd.index("--junitxml"), "--hypothesis-disable-deadline")
        print(f"ARRAY_API_TESTS_MODULE={env['ARRAY_API_TESTS_MODULE']}", flush=True)
        print(f"cd {suite} && {' '.join(cmd)}", flush=True)
        print(f"xfails: {len(ids)} from {xfails if xfails.exists() else 'no file'}", flush=True)
        proc = subprocess.run(cmd, cwd=suite, env=env, check=False)
        counts = count_junit(junit) if junit.exists() else None
    if counts is None:
        print(f"tessera_array on {device}: no results (pytest exit status {proc.returncode})")
    else:
        print(f"tessera_array on {device}: {format_counts(counts)}")
        print(f"{counts['passed']} passed, {counts['failed'] + counts['errors']} failed")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
