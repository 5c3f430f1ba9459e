"""The dialect-free build stack of the device backends (backends/_common), without a device.

A fake dialect "compiles" a toy language (``kernel NAME = TEXT`` lines; a line holding
``error`` is rejected with a log naming it), so the source lookup with includes, the
memory and disk caches and their keys, the one KernelCompileError, the cache registry
and the layout helpers are all tested here on any machine.
"""

from __future__ import annotations

import re

import pytest
from tessera_array.backends._common import (
    BuildFailure,
    BuildStack,
    Dialect,
    Memo,
    SourceTree,
    broadcast_shape,
    c_strides,
    clear_all,
    coalesce,
    disk_cache_dir,
    from_text,
    memo,
    memos,
)

from tessera_array._errors import KernelCompileError


class FakeProgram(dict):
    """Kernel name -> its text; ``origin`` says whether it was compiled or loaded."""

    origin = "compiled"


class FakeDialect(Dialect):
    backend = "fake"

    def __init__(self, fingerprint="fake-compiler 1.0 / device A"):
        self.fp = fingerprint
        self.compiled = []  # (context, options) of every compile

    def fingerprint(self, context) -> str:
        return f"{self.fp} / {context}"

    def compile(self, context, text, options):
        self.compiled.append((context, options))
        prg = FakeProgram()
        for i, line in enumerate(text.splitlines(), 1):
            if "error" in line:
                raise BuildFailure(f"<source>:{i}: error: rejected line {line.strip()!r}")
            hit = re.match(r"kernel (\w+) = (.*)$", line)
            if hit:
                prg[hit.group(1)] = hit.group(2) + " ".join(options)
        return prg

    def binary(self, program):
        return "\n".join(f"{k}\t{v}" for k, v in program.items()).encode()

    def load(self, context, binary, options):
        prg = FakeProgram(line.split("\t") for line in binary.decode().splitlines())
        prg.origin = "loaded"
        return prg

    def kernel(self, program, name, signature=None):
        return (name, program[name], signature)


@pytest.fixture
def disk(tmp_path, monkeypatch):
    """The disk cache under a fresh TESSERA_CACHE_DIR."""
    monkeypatch.setenv("TESSERA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TESSERA_DISK_CACHE", raising=False)
    return tmp_path / "cache" / "fake"


def _stack(dialect=None, version="1.0"):
    return BuildStack(dialect or FakeDialect(), version=version)


SRC = from_text("kernel add = a + b\nkernel mul = a * b\n", "toy.k")


# ---- the registry of caches ----------------------------------------------------------------


def _recorded(m, backend=None) -> bool:
    return any(r is m for r in memos(backend))


def test_memo_is_a_registered_dict_that_clear_all_empties():
    a = memo("fakeA.things")
    b = memo("fakeB.things", limit=2)
    a["x"] = 1
    b.put("y", 2)
    assert isinstance(a, dict) and a == {"x": 1} and a.name == "fakeA.things"
    assert _recorded(a, "fakeA") and not _recorded(b, "fakeA") and _recorded(b)
    clear_all("fakeA")
    assert a == {} and b == {"y": 2}  # only that backend's
    clear_all()
    assert b == {}
    assert "fakeB.things" in repr(b)


def test_memo_put_starts_again_when_full():
    m = memo("fakeA.bounded", limit=3)
    for k in range(3):
        assert m.put(k, k * 10) == k * 10
    assert len(m) == 3
    m.put(3, 30)
    assert m == {3: 30}


def test_memo_of_a_name_again_replaces_the_first_in_the_record():
    first = memo("fakeA.again")
    second = memo("fakeA.again")
    first["k"] = second["k"] = 1
    clear_all("fakeA")
    assert second == {} and first == {"k": 1}


@pytest.mark.parametrize("name", ["", "nodot", "a..b", ".a", "a."])
def test_memo_names_are_dotted(name):
    with pytest.raises(ValueError, match=r"memo: expected a dotted name .*Received: name="):
        memo(name)


# ---- sources with includes -----------------------------------------------------------------


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "kernels"
    (root / "toy").mkdir(parents=True)
    (root / "include" / "tessera").mkdir(parents=True)
    (root / "include" / "tessera" / "shared.h").write_text("// shared\n#define ONE 1\n")
    (root / "toy" / "local.h").write_text('// local\n#include "tessera/shared.h"\n')
    (root / "toy" / "main.k").write_text(
        'first line\n#include "local.h"\n  #  include "tessera/shared.h"  // twice\n'
        "#include <system.h>\nkernel add = a + b\n")
    return root


def test_source_tree_pastes_includes_recursively(tree):
    st = SourceTree("faketree", [tree / "toy", tree / "include"], paste=True, root=tree)
    src = st.load("main.k")
    assert src.name == "kernels/toy/main.k"
    assert src.text.splitlines() == [
        "first line", "// local", "// shared", "#define ONE 1", "// shared", "#define ONE 1",
        "#include <system.h>", "kernel add = a + b"]
    assert [name for name, _ in src.headers] == [
        "kernels/toy/local.h", "kernels/include/tessera/shared.h",
        "kernels/include/tessera/shared.h"]
    assert st.load("main.k") is src  # kept


def test_source_tree_without_pasting_keeps_the_text_and_hashes_the_headers(tree):
    st = SourceTree("faketree", [tree / "toy", tree / "include"], paste=False, root=tree)
    src = st.load("main.k")
    assert src.text == (tree / "toy" / "main.k").read_text()
    assert len(src.headers) == 3
    before = src.digest
    (tree / "include" / "tessera" / "shared.h").write_text("#define ONE 2\n")
    clear_all("faketree")
    again = st.load("main.k")
    assert again.text == src.text and again.digest != before  # a header's change shows


def test_source_tree_errors(tree):
    st = SourceTree("faketree", [tree / "toy"], paste=True, root=tree)
    with pytest.raises(FileNotFoundError, match=r"Received: file='nope\.k'"):
        st.load("nope.k")
    with pytest.raises(FileNotFoundError,
                       match=r"kernels/toy/local\.h includes 'tessera/shared\.h'"):
        st.load("main.k")  # the shared folder is not in this tree
    (tree / "toy" / "loop.h").write_text('#include "loop.h"\n')
    with pytest.raises(RecursionError, match="a cycle"):
        st.load("loop.h")


def test_from_text_digests_the_text():
    assert from_text("a").digest == from_text("a", "other name").digest
    assert from_text("a").digest != from_text("b").digest
    assert from_text("a").name == "generated program" and from_text("a").headers == ()


# ---- compile and cache ---------------------------------------------------------------------


def test_program_is_built_once_per_scope_source_and_options(disk):
    d = FakeDialect()
    stack = _stack(d)
    p = stack.program("ctx0", SRC, ("-O1",))
    assert stack.program("ctx0", SRC, ("-O1",)) is p and stack.build_count() == 1
    assert stack.program("ctx0", SRC, ["-O1"]) is p  # options as a list: the same key
    assert stack.program("ctx0", SRC, ("-O2",)) is not p
    assert stack.program("ctx1", SRC, ("-O1",)) is not p
    assert stack.program("ctx0", from_text(SRC.text + "\n"), ("-O1",)) is not p
    assert stack.build_count() == 4 and len(d.compiled) == 4
    k = stack.kernel("ctx0", SRC, "mul", ("-O1",), signature=("i", None))
    assert k == ("mul", "a * b-O1", ("i", None))
    assert stack.kernel("ctx0", SRC, "mul", ("-O1",), signature=("i", None)) is k
    assert stack.build_count() == 4  # its program was kept


def test_a_rejected_source_raises_kernel_compile_error(disk):
    stack = _stack()
    bad = from_text("kernel a = 1\nkernel b = error here\n", "kernels/toy/bad.k")
    with pytest.raises(KernelCompileError,
                       match=r"fake: building kernels/toy/bad\.k failed\. Received: "
                             r"options=-DX=1 -O2") as info:
        stack.program("ctx", bad, ("-DX=1", "-O2"))
    err = info.value
    assert err.backend == "fake" and err.options == ("-DX=1", "-O2")
    assert "<source>:2: error: rejected line" in err.log and err.source == bad.text
    assert "   2 | kernel b = error here" in str(err)  # the numbered source
    assert isinstance(err.__cause__, BuildFailure)
    assert stack.build_count() == 0
    assert not disk.exists()  # nothing saved


def test_disk_cache_serves_a_new_process(disk):
    first = _stack()
    p = first.program("ctx", SRC, ("-O1",))
    files = list(disk.rglob("*.bin"))
    assert len(files) == 1 and files[0].name == first.key("ctx", SRC, ("-O1",)) + ".bin"
    d = FakeDialect()
    second = _stack(d)  # (a fresh memory cache, as in a new process)
    q = second.program("ctx", SRC, ("-O1",))
    assert q == p and q.origin == "loaded" and d.compiled == []
    assert second.stats == {"compiled": 0, "loaded": 1} and second.build_count() == 1


@pytest.mark.parametrize("change", ["options", "version", "fingerprint", "context", "source"])
def test_disk_key_covers_every_input(disk, change):
    base = _stack().key("ctx", SRC, ("-O1",))
    stack = _stack(FakeDialect("other compiler") if change == "fingerprint" else None,
                   version="2.0" if change == "version" else "1.0")
    key = stack.key("ctx2" if change == "context" else "ctx",
                    from_text(SRC.text + "x") if change == "source" else SRC,
                    ("-O2",) if change == "options" else ("-O1",))
    assert key != base
    assert _stack().key("ctx", SRC, ("-O1",)) == base


def test_disk_cache_switched_off(disk, monkeypatch):
    monkeypatch.setenv("TESSERA_DISK_CACHE", "0")
    assert disk_cache_dir("fake") is None
    stack = _stack()
    stack.program("ctx", SRC)
    assert not disk.exists()
    assert _stack().program("ctx", SRC).origin == "compiled"


def test_a_dialect_may_leave_programs_to_its_driver(disk):
    class DriverCached(FakeDialect):
        def disk_cache(self, context):
            return context != "cached-by-driver"

    stack = _stack(DriverCached())
    stack.program("cached-by-driver", SRC)
    assert not disk.exists()
    stack.program("ctx", SRC)
    assert len(list(disk.rglob("*.bin"))) == 1


def test_disk_cache_default_folder(monkeypatch, tmp_path):
    monkeypatch.delenv("TESSERA_CACHE_DIR", raising=False)
    monkeypatch.delenv("TESSERA_DISK_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert disk_cache_dir("fake") == tmp_path / "tessera_array" / "fake"


def test_a_broken_binary_is_compiled_again_and_replaced(disk):
    class Picky(FakeDialect):
        def load(self, context, binary, options):
            if not binary.startswith(b"add\t"):
                raise ValueError("not a binary of this dialect")
            return super().load(context, binary, options)

    _stack().program("ctx", SRC)
    (path,) = disk.rglob("*.bin")
    path.write_bytes(b"garbage")
    d = Picky()
    prg = _stack(d).program("ctx", SRC)
    assert prg.origin == "compiled" and len(d.compiled) == 1
    assert path.read_bytes().startswith(b"add\t")  # replaced by a good one


def test_an_unwritable_cache_folder_leaves_programs_unsaved(disk, tmp_path, monkeypatch):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("TESSERA_CACHE_DIR", str(blocker))
    assert _stack().program("ctx", SRC)["add"] == "a + b"


def test_stack_caches_are_registered_and_cleared(disk):
    stack = _stack()
    stack.kernel("ctx", SRC, "add")
    names = {m.name for m in memos("fake") if m}
    assert {"fake.programs", "fake.kernels", "fake.fingerprints"} <= names
    clear_all("fake")
    assert not any(memos("fake"))
    stack.kernel("ctx", SRC, "add")
    assert stack.stats == {"compiled": 1, "loaded": 1}  # rebuilt (from disk)


# ---- layout math ---------------------------------------------------------------------------


def test_c_strides():
    assert c_strides((2, 3, 4)) == [12, 4, 1]
    assert c_strides((2, 3, 4), 8) == [96, 32, 8]
    assert c_strides(()) == [] and c_strides((5,), 2) == [2]
    assert c_strides((3, 0, 2)) == [0, 2, 1]


def test_broadcast_shape():
    assert broadcast_shape([(3, 1), (4,), ()]) == (3, 4)
    assert broadcast_shape([]) == ()
    with pytest.raises(ValueError, match=r"could not be broadcast together with shapes "
                                         r"\(3,\) \(4,\)"):
        broadcast_shape([(3,), (4,)])


def test_coalesce_merges_chained_axes():
    # C-contiguous: one axis; transposed: two; a broadcast axis stays apart.
    assert coalesce((2, 3, 4), [[12, 4, 1]]) == ([24], [[1]])
    assert coalesce((3, 2), [[1, 3], [2, 1]]) == ([3, 2], [[1, 3], [2, 1]])
    assert coalesce((2, 1, 3), [[3, 99, 1], [0, 7, 1]]) == ([2, 3], [[3, 1], [0, 1]])


def test_a_memo_made_directly_is_not_recorded():
    m = Memo("fakeA.local")
    assert type(m).__mro__[1] is dict and not _recorded(m)
