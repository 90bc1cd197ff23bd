"""Generated checks: questions the agent cannot have memorised.

A task's fixed hidden tests ask the same questions every time, so a lookup table
of their answers passes them however it is encoded or hidden, and a package that
answers them only when it looks like the judge is running it passes too. A
generated check asks questions drawn at judge time: the task's generator module
draws them from a seed keyed by a secret of the judge's host and by the task
(:func:`seed_for`: nobody without the secret can compute them), and the expected
answers come from the task's *reference solution*, run by the judge outside the
agent's sandbox. A table of the fixed examples, wherever it lives, then fails the
generated cases.

Two shapes, by what the family's hidden tests exercise (``hidden_tests.runs``):

``bridge`` (the tests call the agent's package)
    The generator (``tasks/<family>/<id>/generator.py``, stdlib only) defines::

        def cases(rng: random.Random, n: int) -> list:   # n inputs, plain data
        def call(case):                                  # runs one case, returns plain data
            from slugkit import slugify                  # the package under test, by name
            return slugify(case["text"], separator=case["sep"])
        def same(expected, actual) -> bool:              # optional (default ==)

    The judge runs ``cases`` and ``call`` against the reference (the initial
    state with the reference patch applied, on the host, in a process of its own)
    and records each outcome: the value returned, or the exception raised. Each
    case then becomes a test of the judge's own pytest (``test_generated[i]``),
    which calls the agent's package across the bridge with the same input: the
    agent's code sees the arguments of the calls it gets, never the answers.
    A raised exception matches one of the same class or of its nearest built-in
    base more specific than ``Exception``.

``outputs`` with a ``procedure`` (the agent leaves a script that makes the outputs)
    The generator defines::

        INPUTS = ["data/sales.csv"]                  # the task's input files (or "dir/") it replaces
        OUTPUTS = ["out/region_totals.json"]          # the files (or "dir/") the procedure must write
        def inputs(rng: random.Random) -> dict:       # one input set: {path: str | bytes}
        def checks(expected: dict, actual: dict) -> dict[str, bool]:   # optional

    For each of ``cases`` input sets the judge runs the reference solution on the
    task's initial state with those inputs, and the agent's procedure (``sh
    solve.sh``) on the judged tree with those inputs, each in the sandbox reset to
    exactly that state, and compares the outputs (``{path: bytes or None}``). By
    default there is one check per entry of ``OUTPUTS``: a ``.json`` file must hold
    the reference's value (types included: ``1`` is not ``1.0``) with the same
    trailing newline and line ends, any other file the reference's bytes, a
    directory the same files each the same.

The score of the ``tests`` judge on a task with a generated check is the share of
generated checks passed (the fixed examples are known in advance, so passing
them is no sign of progress); a pass needs every generated check and every
fixed test (see :mod:`judges.builtin.tests`).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judges.errors import JudgeError, WorkspaceUnjudgeable

GENERATED_TEST = "test_trajlake_generated.py"
"""The file the generated check runs as, beside the hidden tests (only ever on the judge's side)."""
GENERATED_DATA = "_trajlake_generated.pickle"
RUNNER_TIMEOUT_S = 120.0


class GeneratedCheckError(JudgeError):
    """The generated check could not be prepared (its generator or reference failed): the judge's fault."""


def seed_for(task: Any) -> int:
    """The generated check's seed for a task on this host: keyed by the host's judge secret.

    Every state of a task is asked the same questions on one host, so scores compare: a state
    that answers the fixed examples from a table, and the rest as the untouched code does,
    scores exactly what doing nothing scores. Nobody without the secret (never in a sandbox) can
    compute them, and they exist only inside the judge's run, which the sandbox's reset wipes: no
    episode can see one, keep one, or carry one out. Another version of the task (its content
    digest) or another host asks other questions.
    """
    from judges.host_run import judge_secret

    msg = b"generated\0" + task.id.encode() + b"\0" + task.content_digest.encode()
    return int.from_bytes(hmac.new(judge_secret(), msg, hashlib.sha256).digest()[:8], "big")


def _python(args: list[str], *, cwd: Path | None = None, timeout: float = RUNNER_TIMEOUT_S) -> None:
    """Run the host's interpreter isolated (``-I -S``: no site hooks, no environment's paths)."""
    import sysconfig

    paths = sysconfig.get_paths()
    site = list(dict.fromkeys([paths["purelib"], paths["platlib"]]))
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1",
           "PYTHONHASHSEED": "0", "TRAJLAKE_SITE": os.pathsep.join(site)}  # fmt: skip
    try:
        p = subprocess.run(
            [sys.executable, "-I", "-S", "-B", *args], cwd=cwd, env=env, capture_output=True, timeout=timeout,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
    except subprocess.TimeoutExpired as exc:
        raise GeneratedCheckError(f"the generated check's runner ran past {timeout:.0f}s") from exc
    if p.returncode != 0:
        tail = (p.stderr or p.stdout).decode("utf-8", "replace").strip().splitlines()[-6:]
        raise GeneratedCheckError("the generated check's runner failed: " + " | ".join(tail))


# --------------------------------------------------------------------------- shared by both sides

OUTCOME_SOURCE = r'''
import builtins


def _plain(v, depth=0):
    """Whether v is plain data (what the bridge copies by value)."""
    if depth > 64:
        return False
    if v is None or type(v) in (bool, int, float, str, bytes, complex):
        return True
    if type(v) in (list, tuple, set, frozenset):
        return all(_plain(x, depth + 1) for x in v)
    if type(v) is dict:
        return all(_plain(k, depth + 1) and _plain(x, depth + 1) for k, x in v.items())
    return False


def outcome(fn, case):
    """("value", result) or ("raises", [class names of the exception's MRO])."""
    try:
        return ("value", fn(case))
    except Exception as exc:  # the case's answer may be an exception
        return ("raises", [k.__name__ for k in type(exc).__mro__])


_GENERIC = {"Exception", "BaseException", "object"}


def _builtin_base(names):
    for n in names:
        k = getattr(builtins, n, None)
        if isinstance(k, type) and issubclass(k, BaseException):
            return None if n in _GENERIC else n
    return None


def same_outcome(expected, actual, same=None):
    """Whether the agent's outcome matches the reference's."""
    ek, ev = expected
    ak, av = actual
    if ek != ak:
        return False
    if ek == "raises":
        base = _builtin_base(ev)
        return ev[0] in av or (base is not None and base in av)
    if same is not None:
        return bool(same(ev, av))
    return bool(ev == av)
'''


def _load_generator_source(name: str = "trajlake_task_generator") -> str:
    return f"""
import importlib.util
def _load_generator(path):
    spec = importlib.util.spec_from_file_location({name!r}, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
"""


# --------------------------------------------------------------------------- bridge families

_BRIDGE_REFERENCE = (
    OUTCOME_SOURCE
    + _load_generator_source()
    + r"""
import copy, os, pickle, random, sys
gen_path, ref_root, out = sys.argv[1], os.path.abspath(sys.argv[2]), os.path.abspath(sys.argv[5])
seed, n = int(sys.argv[3]), int(sys.argv[4])
sys.path[:0] = [ref_root]
sys.path += [p for p in os.environ.get("TRAJLAKE_SITE", "").split(os.pathsep) if p]
os.chdir(ref_root)
gen = _load_generator(gen_path)
cases = list(gen.cases(random.Random(seed), n))
for i, c in enumerate(cases):
    if not _plain(c):
        raise SystemExit(f"case {i} of the generator is not plain data: {type(c).__name__}")
expected = []
for i, c in enumerate(cases):
    got = outcome(gen.call, copy.deepcopy(c))
    if got[0] == "value" and not _plain(got[1]):
        kind = type(got[1]).__name__
        raise SystemExit(f"the generator's call returned {kind} for case {i}: return plain data")
    expected.append(got)
with open(out, "wb") as fh:
    pickle.dump({"cases": cases, "expected": expected}, fh)
"""
)

_BRIDGE_TEST = (
    OUTCOME_SOURCE
    + _load_generator_source()
    + r"""
import copy, os, pickle

import pytest

with open(os.path.join(os.path.dirname(__file__), "_trajlake_generated.pickle"), "rb") as _fh:
    _DATA = pickle.load(_fh)
_GEN = _load_generator(_DATA["module"])


@pytest.mark.parametrize("i", range(len(_DATA["cases"])))
def test_generated(i):
    case, expected = _DATA["cases"][i], _DATA["expected"][i]
    actual = outcome(_GEN.call, copy.deepcopy(case))
    shown = actual[1] if actual[0] == "value" else "raises " + actual[1][0]
    want = expected[1] if expected[0] == "value" else "raises " + expected[1][0]
    same = getattr(_GEN, "same", None)
    assert same_outcome(expected, actual, same), f"case {case!r}: got {shown!r}, expected {want!r}"
"""
)

_REFERENCE_TREES: dict[str, Path] = {}
_TREE_LOCK = threading.Lock()


def reference_tree(task: Any) -> Path:
    """The task's initial state with its reference patch applied, on the host (built once per content)."""
    key: str = task.content_digest
    with _TREE_LOCK:
        hit = _REFERENCE_TREES.get(key)
        if hit is not None and hit.is_dir():
            return hit
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "trajlake" / "references"
        dest = base / key[:32]
        if not dest.is_dir():
            ref = task.spec.reference_solution
            if ref.patch is None:
                raise GeneratedCheckError(
                    f"{task.id}: a bridge family's generated check needs a reference patch, not a script"
                )
            base.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=".ref-", dir=base))
            try:
                shutil.copytree(task.initial_dir, tmp / "tree")
                p = subprocess.run(
                    ["git", "apply", "--allow-empty", "--whitespace=nowarn", "-"],
                    cwd=tmp / "tree",
                    input=task.reference_bytes(),
                    capture_output=True, timeout=60,
                )  # fmt: skip
                if p.returncode != 0:
                    raise GeneratedCheckError(
                        f"{task.id}: the reference patch does not apply: "
                        + p.stderr.decode(errors="replace")[-300:]
                    )
                try:
                    os.rename(tmp / "tree", dest)
                except OSError:
                    if not dest.is_dir():
                        raise
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
        _REFERENCE_TREES[key] = dest
        return dest


@dataclass(frozen=True)
class BridgeCases:
    """Generated cases of a bridge family and the reference's outcome for each."""

    cases: list[Any]
    expected: list[tuple[str, Any]]


_CACHE: OrderedDict[tuple[str, int, int], Any] = OrderedDict()
_CACHE_LOCK = threading.Lock()


def _cached(key: tuple[str, int, int], make: Any) -> Any:
    with _CACHE_LOCK:
        if key in _CACHE:
            _CACHE.move_to_end(key)
            return _CACHE[key]
    value = make()
    with _CACHE_LOCK:
        _CACHE[key] = value
        while len(_CACHE) > 256:
            _CACHE.popitem(last=False)
    return value


def bridge_cases(task: Any, seed: int, *, cached: bool = True) -> BridgeCases:
    """The cases the seed draws and what the reference does with each (cached per task and seed)."""
    gen = task.spec.generated
    assert gen is not None and task.generator_path is not None

    def make() -> BridgeCases:
        tree = reference_tree(task)
        with tempfile.TemporaryDirectory(prefix="trajlake-gen-") as tmp:
            out = Path(tmp) / "cases.pickle"
            _python(["-c", _BRIDGE_REFERENCE, str(task.generator_path), str(tree), str(seed), str(gen.cases),
                     str(out)])  # fmt: skip
            data = pickle.loads(out.read_bytes())
        return BridgeCases(data["cases"], data["expected"])

    if not cached:
        return make()
    return _cached((task.content_digest, seed, gen.cases), make)  # type: ignore[no-any-return]


def write_bridge_check(target_dir: Path, task: Any, cases: BridgeCases) -> None:
    """Put the generated check beside the hidden tests on the judge's side (never in the sandbox)."""
    target_dir.mkdir(parents=True, exist_ok=True)
    (target_dir / GENERATED_DATA).write_bytes(
        pickle.dumps({"module": str(task.generator_path), "cases": cases.cases, "expected": cases.expected})
    )
    (target_dir / GENERATED_TEST).write_text(_BRIDGE_TEST)


def is_generated(test_name: str) -> bool:
    """Whether a test outcome is one of the generated check's."""
    return "test_trajlake_generated" in test_name


# --------------------------------------------------------------------------- outputs families (procedure)

_INPUTS = (
    _load_generator_source()
    + r"""
import pickle, random, sys
gen_path, seed, n, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
gen = _load_generator(gen_path)
rng = random.Random(seed)
sets = []
for _ in range(n):
    files = gen.inputs(rng)
    sets.append({str(k): (v.encode() if isinstance(v, str) else bytes(v)) for k, v in files.items()})
with open(out, "wb") as fh:
    pickle.dump({"sets": sets, "inputs": list(gen.INPUTS), "outputs": list(gen.OUTPUTS)}, fh)
"""
)

_PROCEDURE_TEST = (
    _load_generator_source()
    + r"""
import json, os, pickle

import pytest

with open(os.path.join(os.path.dirname(__file__), "_trajlake_generated.pickle"), "rb") as _fh:
    _DATA = pickle.load(_fh)
_GEN = _load_generator(_DATA["module"])


def _same_json(a, b):
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same_json(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same_json(x, y) for x, y in zip(a, b))
    return a == b


def _same_file(path, want, got):
    if want is None or got is None:
        return False
    if not path.endswith(".json"):
        return got == want
    try:
        same = _same_json(json.loads(want.decode("utf-8")), json.loads(got.decode("utf-8")))
    except ValueError:
        return False
    return same and got.endswith(b"\n") == want.endswith(b"\n") and (b"\r" in got) == (b"\r" in want)


def _checks(expected, actual):
    custom = getattr(_GEN, "checks", None)
    if custom is not None:
        return dict(custom(expected, actual))
    out = {}
    for path in _GEN.OUTPUTS:
        if path.endswith("/"):  # a directory: the same files, each the same
            want = {p: d for p, d in expected.items() if p.startswith(path)}
            got = {p: d for p, d in actual.items() if p.startswith(path)}
            out[path] = bool(want) and want.keys() == got.keys() and all(_same_file(p, want[p], got[p]) for p in want)
        else:
            out[path] = _same_file(path, expected.get(path), actual.get(path))
    return out


_ITEMS = []
for _i, _run in enumerate(_DATA["runs"]):
    if _run["error"]:
        _ITEMS.append((f"set{_i}-procedure", False, _run["error"]))
        continue
    for _name, _ok in sorted(_checks(_run["expected"], _run["actual"]).items()):
        _ITEMS.append((f"set{_i}-{_name}", bool(_ok), "differs from the reference's output"))


@pytest.mark.parametrize("name,ok,why", _ITEMS, ids=[x[0] for x in _ITEMS])
def test_generated(name, ok, why):
    assert ok, f"{name}: {why}"
"""
)


@dataclass(frozen=True)
class InputSets:
    """Generated input sets of a procedure family."""

    sets: list[dict[str, bytes]]
    inputs: list[str]
    outputs: list[str]


def input_sets(task: Any, seed: int, *, cached: bool = True) -> InputSets:
    """The input sets the seed draws (cached per task and seed)."""
    gen = task.spec.generated
    assert gen is not None and task.generator_path is not None

    def make() -> InputSets:
        with tempfile.TemporaryDirectory(prefix="trajlake-gen-") as tmp:
            out = Path(tmp) / "inputs.pickle"
            _python(["-c", _INPUTS, str(task.generator_path), str(seed), str(gen.cases), str(out)])
            data = pickle.loads(out.read_bytes())
        return InputSets(data["sets"], data["inputs"], data["outputs"])

    if not cached:
        return make()
    return _cached((task.content_digest, seed, -gen.cases), make)  # type: ignore[no-any-return]


def write_procedure_check(target_dir: Path, task: Any, runs: list[dict[str, Any]]) -> None:
    """Put the generated check's comparisons beside the hidden tests on the judge's side."""
    target_dir.mkdir(parents=True, exist_ok=True)
    (target_dir / GENERATED_DATA).write_bytes(
        pickle.dumps({"module": str(task.generator_path), "runs": runs})
    )
    (target_dir / GENERATED_TEST).write_text(_PROCEDURE_TEST)


def _read_outputs(sandbox: Any, paths: list[str]) -> dict[str, bytes | None]:
    """The outputs a run left, read as the judge reads a final state (links resolved or refused).

    Each named file's bytes (``None``: missing), and every file under a named directory
    (``"photos/"``).

    Raises:
        WorkspaceUnjudgeable: the run left a workspace the judge cannot read.
    """
    from judges.final_state import WORKSPACE_LIMIT, read_archive
    from sandboxes.errors import SandboxQuotaError

    try:
        archive = sandbox.export_workspace(max_bytes=WORKSPACE_LIMIT)
    except SandboxQuotaError as exc:  # the run left more than the judge reads: its doing
        raise WorkspaceUnjudgeable(f"the workspace cannot be archived: {exc}") from exc
    tree = read_archive(archive)
    out: dict[str, bytes | None] = {}
    for path in paths:
        if path.endswith("/"):
            out.update({p: d for p, d in sorted(tree.files.items()) if p.startswith(path)})
        else:
            out[path] = tree.files.get(path)
    return out


def procedure_runs(task: Any, sandbox: Any, state: Any, seed: int) -> list[dict[str, Any]]:
    """Run the reference and the agent's procedure on each generated input set; their outputs.

    Each run starts from the sandbox reset to exactly its state (the task's initial state for the
    reference, the judged tree for the agent's procedure) with the generated inputs written over
    the task's and no outputs; the sandbox ends reset to the judged tree again.

    Raises:
        GeneratedCheckError: the generator or the reference failed (the judge's fault).
        SandboxError: the sandbox broke.
    """
    from judges.context import initial_tree
    from judges.replay import apply_reference

    gen = task.spec.generated
    sets = input_sets(task, seed)
    initial = initial_tree(task.initial_dir)
    gone = tuple(sets.inputs) + tuple(sets.outputs)
    runs: list[dict[str, Any]] = []
    try:
        for i, files in enumerate(sets.sets):

            def reference(files: dict[str, bytes] = files, i: int = i) -> dict[str, bytes | None]:
                initial.edited(remove=gone, replace=files).load_into(sandbox)
                for cmd in task.spec.initial_state.setup:
                    sandbox.exec(cmd, timeout=300)
                r = apply_reference(task, sandbox)
                if r.exit_code != 0 or r.timed_out:
                    raise GeneratedCheckError(
                        f"{task.id}: the reference failed on generated input set {i} (exit {r.exit_code}): "
                        f"{(r.stderr or r.stdout)[-300:]}"
                    )
                try:
                    return _read_outputs(sandbox, sets.outputs)
                except WorkspaceUnjudgeable as exc:
                    raise GeneratedCheckError(
                        f"{task.id}: the reference's outputs cannot be read: {exc}"
                    ) from exc

            expected = _cached((task.content_digest, seed, 10_000 + i), reference)
            error = None
            actual: dict[str, bytes | None] = {}
            if gen.procedure not in state.files:
                error = f"the workspace holds no {gen.procedure} to run on other inputs"
            else:
                state.edited(remove=gone, replace=files).load_into(sandbox)
                r = sandbox.exec(["sh", gen.procedure], timeout=gen.timeout_s)
                if r.timed_out:
                    error = f"{gen.procedure} ran past {gen.timeout_s:.0f}s on generated input set {i}"
                else:
                    try:
                        actual = _read_outputs(sandbox, sets.outputs)
                    except WorkspaceUnjudgeable as exc:
                        error = (
                            f"the outputs of {gen.procedure} on generated input set {i} cannot be read: {exc}"
                        )
            runs.append({"expected": expected, "actual": actual, "error": error})
    finally:
        state.load_into(sandbox)
    return runs


_COMPARE = (
    OUTCOME_SOURCE
    + _load_generator_source()
    + r"""
import pickle, sys
gen = _load_generator(sys.argv[1])
ref = pickle.load(open(sys.argv[2], "rb"))
other = pickle.load(open(sys.argv[3], "rb"))
same = getattr(gen, "same", None)
oks = [same_outcome(e, a, same) for e, a in zip(ref["expected"], other["expected"])]
pickle.dump(oks, open(sys.argv[4], "wb"))
"""
)


def preview_bridge(task: Any, seed: int, other_root: Path) -> tuple[BridgeCases, list[bool]]:
    """The generated cases of ``seed`` and which of them a package tree on the host gets right.

    For task authors (``trajlake tasks generated``): run against the untouched initial state it
    shows how much of the check the bug fails; against an alternative fix, whether the check
    asks only what the task specifies. The tree is the task's own code, run on the host.
    """
    gen = task.spec.generated
    assert gen is not None and task.generator_path is not None
    ref = bridge_cases(task, seed)
    with tempfile.TemporaryDirectory(prefix="trajlake-gen-") as tmp:
        t = Path(tmp)
        (t / "ref.pickle").write_bytes(pickle.dumps({"cases": ref.cases, "expected": ref.expected}))
        args = [str(task.generator_path), str(other_root), str(seed), str(gen.cases)]
        _python(["-c", _BRIDGE_REFERENCE, *args, str(t / "other.pickle")])
        _python(["-c", _COMPARE, str(task.generator_path), str(t / "ref.pickle"), str(t / "other.pickle"),
                 str(t / "oks.pickle")])  # fmt: skip
        oks = pickle.loads((t / "oks.pickle").read_bytes())
    return ref, oks
