"""Null-effort outputs: what a policy can leave without doing any of the task.

A partial credit that pays for the form of an answer (its length, its letters,
an output of the right shape with zeros in it) pays a policy that does nothing
of the task, and an RL run finds such credit. Admission therefore judges a set
of null-effort states of every task with the task's own judge and refuses the
task, or its partial-credit rule, when any of them scores above doing nothing
(:func:`judges.admission.admit`).

The states are built from the task itself, never from a list of known answers:

* families judged on their outputs (``outputs``): the files the reference
  solution writes, transformed so that nothing of the task is done: emptied,
  each line reversed (for an answer that is a reversal, the input echoed back),
  its characters sorted, its first character repeated, every letter and digit
  replaced by a placeholder of the same shape, every number zeroed, every number
  replaced by a count (invented line numbers), cut to its first line, and the
  task's largest input file copied in their place. Where the task asks for a
  procedure (``solve.sh``), the null state's procedure writes those same files
  whatever its inputs;
* families whose tests call the agent's package (``bridge``): every module of
  the package replaced by a stub whose every name is a function that returns
  ``None``, its first argument (the input echoed), an empty string, zero, an
  empty list, or raises ``ValueError``; and the package emptied.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from judges.final_state import FinalState


@dataclass(frozen=True)
class NullEffort:
    """One null-effort state: files written over the task's initial state."""

    name: str
    files: dict[str, bytes] = field(default_factory=dict)


def _lines(data: bytes, fn: Any) -> bytes:
    text = data.decode("utf-8", "replace")
    return "".join(fn(line) + nl for line, nl in re.findall(r"([^\n]*)(\n?)", text) if line or nl).encode()


def _numbers(data: bytes, fn: Any) -> bytes:
    count = iter(range(1, 1 << 30))
    return re.sub(rb"\d+", lambda m: str(fn(m, next(count))).encode(), data)


_OUTPUT_TRANSFORMS: dict[str, Any] = {
    "empty": lambda d: b"",
    "reversed": lambda d: _lines(d, lambda s: s[::-1]),
    "sorted": lambda d: _lines(d, lambda s: "".join(sorted(s))),
    "repeated": lambda d: _lines(d, lambda s: s[:1] * len(s)),
    "placeholder": lambda d: re.sub(rb"[0-9]", b"0", re.sub(rb"[a-z]", b"a", re.sub(rb"[A-Z]", b"A", d))),
    "zeroed": lambda d: _numbers(d, lambda m, i: 0),
    "renumbered": lambda d: _numbers(d, lambda m, i: i),
    "first_line": lambda d: d.split(b"\n", 1)[0] + (b"\n" if b"\n" in d else b""),
}


def output_paths(initial: FinalState, reference: FinalState, procedure: str | None) -> list[str]:
    """The files the reference solution writes (added or changed), its procedure aside."""
    return sorted(p for p, d in reference.files.items() if initial.files.get(p) != d and p != procedure)


def _procedure_for(files: dict[str, bytes]) -> bytes:
    """A ``solve.sh`` that writes exactly ``files`` (kept beside it), whatever the inputs are."""
    lines = ["#!/bin/sh", "# a null-effort procedure: the same outputs whatever the inputs"]
    for path in sorted(files):
        keep = f".null/{path}"
        lines.append(f"mkdir -p {shlex.quote(str(PurePosixPath(path).parent))}")
        lines.append(f"cp {shlex.quote(keep)} {shlex.quote(path)}")
    return ("\n".join(lines) + "\n").encode()


def output_nulls(initial: FinalState, reference: FinalState, procedure: str | None) -> list[NullEffort]:
    """Null-effort states of a family judged on its outputs (see the module docstring)."""
    outputs = output_paths(initial, reference, procedure)
    if not outputs:
        return []

    def null(p: str, data: bytes) -> bytes:
        # a transform that leaves an output as it is would hand the right output in: empty it instead
        return b"" if data == reference.files[p] else data

    sources = {
        name: {p: null(p, fn(reference.files[p])) for p in outputs} for name, fn in _OUTPUT_TRANSFORMS.items()
    }
    inputs = [p for p in initial.files if not p.lower().startswith("readme")]
    if inputs:
        largest = max(inputs, key=lambda p: (len(initial.files[p]), p))
        sources["input_copied"] = {p: null(p, initial.files[largest]) for p in outputs}
    out = []
    seen: list[dict[str, bytes]] = []
    for name, files in sources.items():
        if files in seen:
            continue  # the same state under another name
        seen.append(files)
        if procedure is not None:
            files = {**files, **{f".null/{p}": d for p, d in files.items()}, procedure: _procedure_for(files)}
        out.append(NullEffort(name, files))
    return out


_STUBS = {
    "returns_none": "return None",
    "echoes_input": "return args[0] if args else next(iter(kwargs.values()), None)",
    "returns_empty_string": "return ''",
    "returns_zero": "return 0",
    "returns_empty_list": "return []",
    "raises": "raise ValueError('not implemented')",
}


def _stub(body: str) -> bytes:
    return (
        "# a null-effort stub: every name is a function that does none of the task\n"
        "def _stub(*args, **kwargs):\n"
        f"    {body}\n\n\n"
        "def __getattr__(name):\n"
        "    if name.startswith('__'):\n"
        "        raise AttributeError(name)\n"
        "    return _stub\n"
    ).encode()


def package_nulls(initial: FinalState, modules: list[str]) -> list[NullEffort]:
    """Null-effort states of a family whose tests call the agent's package (see the module docstring)."""
    code = [
        p for p in initial.files
        if p.endswith(".py") and (p.split("/", 1)[0] in modules or PurePosixPath(p).stem in modules)
    ]  # fmt: skip
    if not code:
        return []
    out = [NullEffort(name, {p: _stub(body) for p in code}) for name, body in _STUBS.items()]
    out.append(NullEffort("emptied", {p: b"" for p in code}))
    return out
