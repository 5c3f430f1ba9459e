"""The backend contract (tessera_array/_backend_api.py) against the front end that relies
on it, every loaded backend, the test fakes and the registered kernels."""

from __future__ import annotations

import pathlib
import re
import types

import numpy as np
import pytest
from _fake_backends import FakeBackend

from tessera_array import _backend_api as api
from tessera_array import _discovery, _dispatch
from tessera_array._errors import BackendUnavailableError

FRONT_END = pathlib.Path(api.__file__).parent


def _front_end_sources():
    # Installed, tessera_array/ also holds backends/ and kernels/: not the front end.
    return {p: p.read_text() for p in sorted(FRONT_END.rglob("*.py"))
            if p.relative_to(FRONT_END).parts[0] not in ("backends", "kernels")}


# ---- the contract is the front end's -----------------------------------------------------


def _ops_names_used():
    """Every ops name the front end calls: ``ops.<name>`` reads, and the elementwise
    functions built by name (``@_unary``/``@_binary`` declarations, ``unary_function``)."""
    used = set()
    for path, text in _front_end_sources().items():
        used |= set(re.findall(r"\bops\.([a-z_][a-z_0-9]*)\b", text))
        used |= set(re.findall(r"@_(?:unary|binary)\([^)]*\)\s*\ndef ([a-z_0-9]+)\(", text))
        used |= set(re.findall(r"(?:unary|binary)_function\(\s*\"([a-z_0-9]+)\"", text))
    return used


def test_ops_contract_is_what_the_front_end_calls():
    used = _ops_names_used()
    declared = set(api.OPS) | set(api.OPTIONAL_OPS)
    assert used - declared == set(), "the front end calls ops names the contract lacks"
    # call_quietly is reached through getattr (optional); every other name is called.
    assert set(api.OPS) - used == set(), "the contract lists names nobody calls"


def test_backend_members_the_front_end_uses_are_declared():
    direct, probed = set(), set()
    for path, text in _front_end_sources().items():
        if path.name == "_backend_api.py":
            continue  # the contract's own checks probe every member
        direct |= set(re.findall(r"\b(?:_backend|be|backend)\.([a-z_][a-z_0-9]*)\b", text))
        probed |= set(re.findall(
            r"getattr\((?:[a-z_.]*\.)?(?:_backend|be|backend|obj), \"([a-z_]+)\"", text))
    direct -= {"backends"}  # the module path tessera_array.backends
    assert direct - set(api.MEMBERS) == set()
    assert probed - set(api.MEMBERS) == set()
    # What the front end reads unguarded must be required; what it probes, optional.
    assert {n for n in direct if not api.MEMBERS[n].required} <= probed
    assert {n for n in probed if api.MEMBERS[n].required} == {"name"}  # discovery's report


def test_kernel_contract_covers_the_registry_ops():
    assert set(api.KERNELS) == set(_dispatch.OPS)


# ---- every backend, and the fakes, meet it -----------------------------------------------


def test_every_loaded_backend_meets_the_contract():
    loaded = _discovery.loaded_backends()
    assert "numpy" in loaded
    for name, backend in loaded.items():
        assert api.check_backend(backend) == [], name


def test_fake_backends_meet_the_contract():
    fake = FakeBackend("fakecontract")
    fake.load()
    assert api.check_backend(fake) == []


def test_every_registered_launcher_fits_its_op():
    loaded = set(_discovery.loaded_backends())
    problems = [
        f"{key}: {why}"
        for key in _dispatch.registry.keys() if key.backend in loaded
        for why in [api.check_launcher(key.op, _dispatch.registry.lookup(*key))] if why
    ]
    assert problems == []


class _Without:
    """A namespace that is ``ops`` without the name ``missing``."""

    def __init__(self, ops, missing):
        self._ops, self._missing = ops, missing

    def __getattr__(self, name):
        if name == self._missing:
            raise AttributeError(name)
        return getattr(self._ops, name)


@pytest.mark.parametrize("name", sorted(api.OPS))
def test_deleting_any_ops_name_fails_the_check(name):
    ops = _discovery.loaded_backends()["numpy"].ops
    problems = api.check_ops(_Without(ops, name), signatures=False)
    assert problems and all(p.startswith(f"ops.{name} is missing") for p in problems)


@pytest.mark.parametrize("name", sorted(n for n, m in api.MEMBERS.items() if m.required))
def test_deleting_any_required_member_fails_the_check_and_the_load(name):
    fake = FakeBackend(f"fakeno{name.replace('_', '')}")
    # Members the fake defines on its class are hidden by an instance attribute that
    # raises; hasattr() then reports it missing.
    stripped = type(f"Without_{name}", (FakeBackend,), {name: property(_raise_attribute)})
    fake.__class__ = stripped
    assert any(p.startswith(f"{name} is missing") for p in api.check_backend(fake))
    if name in ("name", "device_kind", "is_available", "load", "devices"):
        return  # the fake's own load() reads these
    with pytest.raises(BackendUnavailableError, match=name):
        _discovery.add_backend(fake)
    _discovery.remove_backend(fake.name)


def _raise_attribute(self):
    raise AttributeError("hidden")


def test_a_backend_without_an_ops_name_does_not_load():
    fake = FakeBackend("fakenoops")
    fake.ops = _Without(fake.ops, "cumulative_sum")
    with pytest.raises(BackendUnavailableError, match="cumulative_sum"):
        _discovery.add_backend(fake)
    _discovery.remove_backend("fakenoops")


# ---- the signature check itself ----------------------------------------------------------


def test_signature_check_accepts_the_call_forms():
    def reduction(a, /, *, axis=None, keepdims=False):
        pass

    assert api.signature_problem(reduction, "(a, /, *, axis, keepdims)") is None
    assert api.signature_problem(np.add, "(a, b, /)") is None
    assert api.signature_problem(lambda *args, **kwargs: None, "(a, /, *, axis)") is None


@pytest.mark.parametrize("func, spec, why", [
    (lambda a, /, *, axes=None: None, "(a, /, *, axis)", "keyword 'axis'"),
    (lambda a, /: None, "(a, b, /)", "positional argument 1"),
    (lambda a, b, /: None, "(a, b=None, /)", "needs a default"),
    (lambda a, /, *, axis: None, "(a, /, *, axis=None)", "needs a default"),
    (lambda a, /, *, axis, extra: None, "(a, /, *, axis)", "requires the keyword 'extra'"),
    (lambda a, b, c, /: None, "(a, b, /)", "requires 'c'"),
    (np.negative, "(a, b, /)", "takes 1 operands"),
])
def test_signature_check_finds_mismatches(func, spec, why):
    assert why in api.signature_problem(func, spec)


def test_a_misspelled_keyword_in_a_backend_op_is_found():
    ops = types.SimpleNamespace(**{n: getattr(_discovery.loaded_backends()["numpy"].ops, n)
                                   for n in api.OPS})
    ops.argsort = lambda a, /, *, axis=-1, descending=False, stabel=True: a
    assert api.check_ops(ops) == [
        "ops.argsort(a, /, *, axis, descending, stable): does not take the keyword 'stable'"
    ]
