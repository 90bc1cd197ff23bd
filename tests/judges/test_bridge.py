"""The object bridge between the judge and the agent's code, over real pipes to a real process.

The agent's side runs in a child process (``python3 -I judges/bridge.py``-style, as in the
sandbox) with a package written to a temporary workspace; the judge's side is this process.
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import textwrap
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import pytest

from judges import bridge
from judges.bridge import JUDGE, BridgeBroken, Peer, Proxy

PACKAGE = """
import collections, datetime, os, sys

class Thing:
    def __init__(self, n):
        self.n = n
    def __eq__(self, other):
        return isinstance(other, Thing) and other.n == self.n
    def __hash__(self):
        return hash(self.n)
    def __len__(self):
        return self.n
    def __iter__(self):
        return iter(range(self.n))
    def __add__(self, other):
        return Thing(self.n + (other.n if isinstance(other, Thing) else other))
    def __repr__(self):
        return f"Thing({self.n})"

class Safe(str):
    pass

class Base(Exception):
    pass

class Special(Base):
    def __init__(self, msg, code):
        super().__init__(msg)
        self.code = code

class AlwaysEqual:
    def __eq__(self, other):
        return True
    def __sub__(self, other):
        return 0
    __rsub__ = __sub__

SEEN = []

def echo(x):
    SEEN.append(repr(x))
    return x

def seen():
    return list(SEEN)

def boom(kind):
    if kind == "value":
        raise ValueError("bad", 3)
    if kind == "special":
        raise Special("special one", 7)
    if kind == "chained":
        try:
            raise TimeoutError("inner")
        except TimeoutError as e:
            raise Base("outer") from e
    if kind == "exit":
        sys.exit(4)

def call_back(fn, *args):
    return fn(*args)

def poke(obj, name):
    return getattr(obj, name)

def gen(n):
    yield from range(n)

def hard_exit():
    os._exit(9)

def safe(text):
    return Safe(text)

def fill(acc, n, *, extra=None):
    acc.extend(range(n))
    if extra is not None:
        extra["n"] = n
    return acc

def magic():
    return AlwaysEqual()

COUNTS = collections.Counter("abca")
WHEN = datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)
"""


@pytest.fixture
def agent(tmp_path: Path):
    """A judge-side peer connected to an agent-side server in a child process."""
    ws = tmp_path / "workspace"
    (ws / "pkg").mkdir(parents=True)
    (ws / "pkg" / "__init__.py").write_text(PACKAGE)
    chan = ws / ".chan"
    chan.mkdir()
    os.mkfifo(chan / "to")
    os.mkfifo(chan / "from")
    proc = subprocess.Popen(
        [sys.executable, "-I", "-c", Path(bridge.__file__).read_text(), str(chan)],
        cwd=ws, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    wfd = os.open(chan / "to", os.O_WRONLY)
    rfd = os.open(chan / "from", os.O_RDONLY)
    peer = Peer(rfd, wfd, JUDGE)
    try:
        yield peer, peer.request("import", "pkg"), proc
    finally:
        peer.close()
        proc.wait(10)
        os.close(rfd)
        os.close(wfd)


def test_plain_values_cross_by_value(agent) -> None:
    _, pkg, _ = agent
    values = [
        None, True, 0, -(2**70), 1.5, float("inf"), "text", b"\x00\xff", [1, [2]], (1, (2, 3)),
        {1: "a", (2, 3): [4]}, {1, 2}, frozenset({3}), dt.date(2024, 1, 2), dt.timedelta(days=1, seconds=3),
        dt.datetime(2024, 1, 2, 3, 4, tzinfo=dt.timezone(dt.timedelta(hours=2))), Decimal("1.10"),
        Fraction(1, 3), 1 + 2j,
    ]  # fmt: skip
    for v in values:
        back = pkg.echo(v)
        assert back == v and type(back) is type(v), v
    assert pkg.COUNTS == {"a": 2, "b": 1, "c": 1} and type(pkg.COUNTS).__name__ == "Counter"
    assert pkg.WHEN == dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC)


def test_mutable_arguments_behave_as_if_passed_by_reference(agent) -> None:
    _, pkg, _ = agent
    acc: list[int] = [9]
    extra: dict[str, int] = {}
    out = pkg.fill(acc, 3, extra=extra)
    assert out is acc and acc == [9, 0, 1, 2] and extra == {"n": 3}
    assert pkg.echo(range(2, 9, 3)) == range(2, 9, 3)


def test_agent_objects_stay_remote(agent) -> None:
    _, pkg, _ = agent
    t = pkg.Thing(3)
    assert isinstance(t, Proxy)
    assert t.n == 3 and len(t) == 3 and list(t) == [0, 1, 2]
    assert t == pkg.Thing(3) and t != pkg.Thing(4)  # both the agent's: its own __eq__
    assert (t + 2).n == 5 and repr(t) == "Thing(3)"
    assert isinstance(t, pkg.Thing) and not isinstance(3, pkg.Thing)
    assert {t: 1}[pkg.Thing(3)] == 1
    assert list(pkg.gen(4)) == [0, 1, 2, 3]
    t.n = 9
    assert t.n == 9


def test_exceptions_map_to_classes_pytest_can_catch(agent) -> None:
    _, pkg, _ = agent
    with pytest.raises(ValueError) as info:
        pkg.boom("value")
    assert info.value.args == ("bad", 3)
    with pytest.raises(pkg.Base) as sp:
        pkg.boom("special")
    assert isinstance(sp.value, pkg.Special) and sp.value.code == 7 and str(sp.value) == "special one"
    with pytest.raises(pkg.Base) as ch:
        pkg.boom("chained")
    assert isinstance(ch.value.__cause__, TimeoutError)
    with pytest.raises(Exception, match="4"):  # SystemExit in the agent's code is its answer, not ours
        pkg.boom("exit")


def test_callbacks_run_here_with_the_agents_arguments(agent) -> None:
    _, pkg, _ = agent
    calls = []
    assert pkg.call_back(lambda a, b: calls.append((a, b)) or a + b, 2, 3) == 5
    assert calls == [(2, 3)]
    import random

    rng = random.Random(1)
    expect = random.Random(1).random()
    assert pkg.call_back(rng.random) == expect


def test_judge_objects_expose_no_private_attributes(agent) -> None:
    _, pkg, _ = agent
    secret = "the expected value"

    def cb() -> str:
        return secret

    with pytest.raises(AttributeError, match="public"):
        pkg.poke(cb, "__globals__")
    with pytest.raises(AttributeError, match="public"):
        pkg.poke(cb, "__closure__")
    # public attributes that lead out: a generator's frame (and from it the judge's builtins)
    gen = (x for x in range(3))
    with pytest.raises(AttributeError, match="methods and plain values"):
        pkg.poke(gen, "gi_frame")
    with pytest.raises(AttributeError, match="methods and plain values"):
        pkg.poke(gen, "gi_code")
    assert pkg.call_back(pkg.poke(gen, "send"), None) == 0  # its own methods still work
    import random

    assert isinstance(pkg.poke(random.Random(3), "gauss"), Proxy) is False  # a bound method, handed over


def test_judge_values_are_never_handed_to_agent_comparisons(agent) -> None:
    _, pkg, _ = agent
    m = pkg.magic()
    assert not (m == "hello_world")  # AlwaysEqual never sees the judge's value
    assert m != 3.0
    assert pkg.magic() != pytest.approx(3.0)
    assert all("hello_world" not in s and "3.0" not in s for s in pkg.seen())
    s = pkg.safe("abc")  # a str subclass: compared by its plain value, here
    assert s == "abc" and s != "abd" and s.upper() == "ABC" and isinstance(s, pkg.Safe)


def test_a_hard_exit_breaks_the_bridge(agent) -> None:
    peer, pkg, proc = agent
    with pytest.raises(BridgeBroken):
        pkg.hard_exit()
    assert peer.broken and proc.wait(10) == 9
    with pytest.raises(BridgeBroken):
        pkg.echo(1)


def test_a_forged_reply_is_refused(tmp_path: Path) -> None:
    r1, w1 = os.pipe()
    r2, w2 = os.pipe()
    peer = Peer(r1, w2, JUDGE)
    garbage = b'{"r": {"$": "ref", "o": "j", "id": 99}}'
    os.write(w1, len(garbage).to_bytes(4, "big") + garbage)
    with pytest.raises(BridgeBroken, match="never exported"):
        peer.request("import", "x")
    for fd in (r1, w1, r2, w2):
        os.close(fd)


def test_server_source_runs_on_its_own(tmp_path: Path) -> None:
    """The file sent to the sandbox needs nothing but the standard library."""
    src = Path(bridge.__file__).read_text()
    assert "from judges" not in src and "import judges" not in src
    code = textwrap.dedent("import ast, sys; ast.parse(sys.stdin.read())")
    subprocess.run([sys.executable, "-I", "-c", code], input=src.encode(), check=True)


def test_the_tests_order_is_the_judges_secret_and_fixed_per_state(monkeypatch, tmp_path) -> None:
    import importlib.util
    import types

    from judges.host_run import PLUGIN_SOURCE, order_seed

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    a, b = order_seed("state-a"), order_seed("state-b")
    assert a == order_seed("state-a") and a != b
    assert (tmp_path / "cache" / "trajlake" / "judge-order.key").stat().st_mode & 0o077 == 0
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "other-host"))
    assert order_seed("state-a") != a, "another host's secret gives another order"

    monkeypatch.setitem(sys.modules, "trajlake_bridge", bridge)
    spec = importlib.util.spec_from_file_location("plugin_under_test", PLUGIN_SOURCE)
    assert spec is not None and spec.loader is not None
    plugin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plugin)

    def order(seed: str | None) -> list[str]:
        items = [types.SimpleNamespace(nodeid=f"t.py::test_{i:02d}") for i in range(12)]
        if seed is None:
            monkeypatch.delenv("TRAJLAKE_BRIDGE_ORDER", raising=False)
        else:
            monkeypatch.setenv("TRAJLAKE_BRIDGE_ORDER", seed)
        plugin.pytest_collection_modifyitems(None, None, items)
        return [i.nodeid for i in items]

    written = order(None)
    assert written == sorted(written)
    assert order(a) == order(a) and sorted(order(a)) == written
    assert order(a) != written and order(a) != order(b)


def test_the_workspace_is_imported_from_source_only(tmp_path: Path) -> None:
    """A forged __pycache__ .pyc (the source's size and time, other code) and a sourceless .pyc do not run."""
    ws = tmp_path / "ws"
    (ws / "pkg").mkdir(parents=True)
    (ws / "pkg" / "__init__.py").write_text('X = "source"\n')
    forge = textwrap.dedent(
        """
        import importlib.util, marshal, os, sys
        src = sys.argv[1]
        st = os.stat(src)
        head = importlib.util.MAGIC_NUMBER + (0).to_bytes(4, "little")
        head += int(st.st_mtime).to_bytes(4, "little") + (st.st_size & 0xFFFFFFFF).to_bytes(4, "little")
        cache = importlib.util.cache_from_source(src)
        os.makedirs(os.path.dirname(cache), exist_ok=True)
        open(cache, "wb").write(head + marshal.dumps(compile('X = "forged"', src, "exec")))
        open(os.path.join(os.path.dirname(os.path.dirname(src)), "loose.pyc"), "wb").write(
            head + marshal.dumps(compile('Y = "no source"', "loose.py", "exec")))
        """
    )
    subprocess.run([sys.executable, "-c", forge, str(ws / "pkg" / "__init__.py")], check=True)
    probe = f"import sys; sys.path.insert(0, {str(ws)!r}); import pkg; print(pkg.X)"
    plain = subprocess.run([sys.executable, "-I", "-c", probe], capture_output=True, text=True)
    assert plain.stdout.strip() == "forged", (
        "the forged cache must fool plain Python, or this test proves nothing"
    )
    guarded = textwrap.dedent(
        f"""
        import importlib.util, sys
        spec = importlib.util.spec_from_file_location("b", {str(Path(bridge.__file__))!r})
        b = importlib.util.module_from_spec(spec); spec.loader.exec_module(b)
        b.source_only_imports({str(ws)!r})
        sys.path.insert(0, {str(ws)!r})
        import pkg
        print(pkg.X)
        try:
            import loose
            print("loose imported")
        except ImportError:
            print("loose refused")
        """
    )
    r = subprocess.run([sys.executable, "-I", "-c", guarded], capture_output=True, text=True)
    assert r.stdout.split() == ["source", "loose", "refused"], r.stdout + r.stderr
