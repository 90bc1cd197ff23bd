"""An object bridge between the trusted judge and the agent's code, over one pipe pair.

The hidden tests of a task that calls the agent's package run in the judge's
own process on the host; the agent's package is imported in the sandbox by a
small server (this same file, run with ``python3 -I``). Every use of an agent
object in a test — a call, an attribute, an operator — becomes a request across
the pipe, and the answer comes back as plain data or as a reference to an object
that stays in the sandbox. Expected values stay on the judge's side: a test's
``assert slugify(x) == "hello_world"`` sends ``x`` and compares the answer here.

What crosses, and what the agent's side may do:

* Plain data (``None``, ``bool``, ``int``, ``float``, ``str``, ``bytes``, lists,
  tuples, dicts, sets, ``range``, the ``datetime`` types, ``Decimal``, ``Fraction``,
  ``complex``, ``Counter``/``OrderedDict``/``deque``) is copied, checked by exact
  type, depth-bounded. Anything else is a reference.
* An agent object that is an instance of a plain type (a ``str`` subclass, a
  named tuple) travels with its plain value, computed by the base type's own
  methods; comparisons, arithmetic, hashing and iteration against judge values use
  that plain value here, so a judge value is never handed to the agent's
  ``__eq__``. Only operations on agent objects with no plain value (the agent's
  own classes) send the other operand: that operand is the test's input to the
  agent's own semantics.
* Judge objects the tests pass as arguments (callbacks, ``random.Random``,
  ``io.StringIO``, generators) are references the agent's side can only call,
  iterate, and ask for public methods bound to them or public attributes that
  are plain data: no ``__globals__``, no ``gi_frame``/``f_builtins``, no module,
  no import, so nothing reaches the test module or the judge's interpreter.
* Every message the agent's side sends is untrusted: a malformed frame, an
  unknown reference, an oversized message or a closed pipe raises
  :class:`BridgeBroken`, which the judge reports as the run ended by agent code.

Stdlib only and Python 3.9+: the file is sent to the sandbox's own interpreter.
"""

from __future__ import annotations

import base64
import builtins
import collections
import datetime
import decimal
import fractions
import json
import math
import operator
import os
import struct
import sys

MAX_MESSAGE = 64 << 20
"""Largest frame either side accepts (bytes of JSON)."""
MAX_DEPTH = 64
"""Containers nested deeper than this travel as references."""
MAX_NESTING = 64
"""Callbacks nested deeper than this (request inside request) break the bridge."""

AGENT, JUDGE = "a", "j"

_BINARY = (
    "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul",
    "and_", "or_", "xor", "lshift", "rshift",
)  # fmt: skip
_COMPARE = ("eq", "ne", "lt", "le", "gt", "ge")
_UNARY = ("neg", "pos", "abs", "invert")
_OPS = frozenset(
    _BINARY
    + _COMPARE
    + _UNARY
    + ("contains", "getitem", "setitem", "delitem", "len", "iter", "next", "bool", "hash", "str", "repr")
    + ("int", "float", "index", "isinstance", "issubclass", "enter", "exit", "dir", "format")
)
_PLAIN_BASES = (str, bytes, int, float, tuple, list, dict, set, frozenset)


class BridgeBroken(Exception):
    """The other side closed the pipe, died, or broke the protocol."""


class RemoteError(Exception):
    """Raised here for an exception of the other side that has no closer local class."""


# --------------------------------------------------------------------------- proxies


def _peer(p):
    return object.__getattribute__(p, "_bridge_peer")


def _plain(p):
    return object.__getattribute__(p, "_bridge_plain")


_NO_PLAIN = object()


class Proxy:
    """A local stand-in for an object that lives on the other side."""

    __slots__ = ("_bridge_peer", "_bridge_id", "_bridge_plain", "_bridge_type", "__weakref__")

    def __getattr__(self, name):
        return _peer(self).request("getattr", self, name)

    def __setattr__(self, name, value):
        _peer(self).request("setattr", self, name, value)

    def __delattr__(self, name):
        _peer(self).request("delattr", self, name)

    def __call__(self, *args, **kwargs):
        """Call the object on its side."""
        return _peer(self).request("call", self, list(args), kwargs)

    def __repr__(self):
        try:
            return _peer(self).request("op", "repr", self)
        except BridgeBroken:
            return f"<{object.__getattribute__(self, '_bridge_type')} (bridge broken)>"

    def __str__(self):
        v = _plain(self)
        if isinstance(v, str):
            return v
        return _peer(self).request("op", "str", self)

    def __format__(self, spec):
        v = _plain(self)
        if v is not _NO_PLAIN:
            return format(v, spec)
        return _peer(self).request("op", "format", self, spec)

    def __bool__(self):
        v = _plain(self)
        return bool(v) if v is not _NO_PLAIN else _peer(self).request("op", "bool", self)

    def __len__(self):
        v = _plain(self)
        return len(v) if v is not _NO_PLAIN else _peer(self).request("op", "len", self)

    def __hash__(self):
        v = _plain(self)
        return hash(v) if v is not _NO_PLAIN else _peer(self).request("op", "hash", self)

    def __iter__(self):
        v = _plain(self)
        if v is not _NO_PLAIN:
            return iter(v)
        it = _peer(self).request("op", "iter", self)
        return it if isinstance(it, Proxy) else iter(it)

    def __next__(self):
        return _peer(self).request("op", "next", self)

    def __contains__(self, item):
        v = _plain(self)
        return item in v if v is not _NO_PLAIN else _peer(self).request("op", "contains", self, item)

    def __getitem__(self, key):
        v = _plain(self)
        return v[key] if v is not _NO_PLAIN else _peer(self).request("op", "getitem", self, key)

    def __setitem__(self, key, value):
        _peer(self).request("op", "setitem", self, key, value)

    def __delitem__(self, key):
        _peer(self).request("op", "delitem", self, key)

    def __int__(self):
        v = _plain(self)
        return int(v) if v is not _NO_PLAIN else _peer(self).request("op", "int", self)

    def __float__(self):
        v = _plain(self)
        return float(v) if v is not _NO_PLAIN else _peer(self).request("op", "float", self)

    def __index__(self):
        v = _plain(self)
        return operator.index(v) if v is not _NO_PLAIN else _peer(self).request("op", "index", self)

    def __enter__(self):
        return _peer(self).request("op", "enter", self)

    def __exit__(self, exc_type, exc, tb):
        return _peer(self).request("op", "exit", self, exc)

    def __dir__(self):
        return _peer(self).request("op", "dir", self)

    def __instancecheck__(self, obj):
        if isinstance(obj, Proxy) and _peer(obj) is _peer(self):
            return _peer(self).request("op", "isinstance", obj, self)
        return False

    def __subclasscheck__(self, cls):
        if isinstance(cls, Proxy) and _peer(cls) is _peer(self):
            return _peer(self).request("op", "issubclass", cls, self)
        return False

    def __copy__(self):
        return _peer(self).request("call", _peer(self).request("import", "copy").copy, [self], {})

    def __deepcopy__(self, memo):
        return _peer(self).request("call", _peer(self).request("import", "copy").deepcopy, [self], {})

    def __reduce_ex__(self, protocol):
        raise TypeError("an object of the other side of the bridge cannot be pickled")


def _binary(name, reflected=False):
    fn = getattr(operator, name)

    def method(self, other):
        mine, theirs = _plain(self), _plain(other) if isinstance(other, Proxy) else other
        if mine is not _NO_PLAIN and theirs is not _NO_PLAIN:
            return fn(theirs, mine) if reflected else fn(mine, theirs)
        if name in _COMPARE and not isinstance(other, Proxy):
            # an agent object without a plain value against a judge value: the value is
            # never handed to the agent's comparison, so they are simply not equal
            return NotImplemented
        args = (other, self) if reflected else (self, other)
        return _peer(self).request("op", name, *args)

    return method


for _name in _BINARY:
    _dunder = _name.rstrip("_")
    setattr(Proxy, f"__{_dunder}__", _binary(_name))
    setattr(Proxy, f"__r{_dunder}__", _binary(_name, reflected=True))
for _name in _COMPARE:
    setattr(Proxy, f"__{_name}__", _binary(_name))
for _name in _UNARY:

    def _make(fn_name):
        fn = getattr(operator, fn_name)

        def method(self):
            v = _plain(self)
            return fn(v) if v is not _NO_PLAIN else _peer(self).request("op", fn_name, self)

        return method

    setattr(Proxy, f"__{_name}__", _make(_name))


class RemoteException(Exception):
    """Base of the local classes that stand for the other side's exception classes."""

    _bridge_ref = None
    _bridge_str = ""

    def __str__(self):
        return self._bridge_str

    def __getattr__(self, name):
        ref = self.__dict__.get("_bridge_ref")
        if ref is None or name.startswith("__"):
            raise AttributeError(name)
        return getattr(ref, name)


# --------------------------------------------------------------------------- the peer


def _exact(v, *types):
    return type(v) in types


class Peer:
    """One end of the bridge: exports its own objects, proxies the other side's.

    Args:
        rfd, wfd: file descriptors of the pipe pair.
        side: ``"a"`` (the agent's side, in the sandbox) or ``"j"`` (the judge's).
    """

    def __init__(self, rfd, wfd, side):
        self._r = rfd
        self._w = wfd
        self._buf = b""  # bytes read past the last frame: one read usually holds a whole frame
        self.side = side
        self.other = JUDGE if side == AGENT else AGENT
        self._exports = {}
        self._export_ids = {}
        self._proxies = {}
        self._exc_classes = {}
        self._depth = 0
        self.requests = 0
        self.broken = None
        """Why the bridge broke (a sentence), or ``None``."""

    # ------------------------------------------------------------- framing

    def _send(self, msg):
        try:
            data = json.dumps(msg, separators=(",", ":"), allow_nan=False).encode()
        except (TypeError, ValueError) as exc:  # a bug of ours, not the peer's
            raise BridgeBroken(f"cannot encode a message: {exc}") from exc
        if len(data) > MAX_MESSAGE:
            raise ValueError(f"a value of {len(data)} bytes is too large for the bridge")
        frame = struct.pack(">I", len(data)) + data
        view = memoryview(frame)
        try:
            while view:
                n = os.write(self._w, view)
                view = view[n:]
        except OSError as exc:
            self._break(f"the other side closed the pipe ({exc.strerror})")

    def _read_exact(self, n):
        buf = self._buf
        if len(buf) >= n:
            self._buf = buf[n:]
            return buf[:n]
        chunks, left = [buf], n - len(buf)
        while left > 0:
            try:
                chunk = os.read(self._r, max(left, 1 << 16))
            except OSError as exc:
                self._break(f"reading the pipe failed ({exc.strerror})")
            if not chunk:
                self._break("the other side closed the pipe")
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        self._buf = data[n:]
        return data[:n]

    def _recv(self):
        (size,) = struct.unpack(">I", self._read_exact(4))
        if size > MAX_MESSAGE:
            self._break(f"the other side sent a frame of {size} bytes")
        try:
            msg = json.loads(self._read_exact(size))
        except (ValueError, RecursionError) as exc:
            self._break(f"the other side sent a malformed frame ({type(exc).__name__})")
        if not isinstance(msg, dict):
            self._break("the other side sent a frame that is not an object")
        return msg

    def _break(self, why):
        if self.broken is None:
            self.broken = why
        raise BridgeBroken(why)

    # ------------------------------------------------------------- requests

    def request(self, op, *args):
        """Ask the other side to perform ``op``; serve its nested requests meanwhile."""
        if self.broken is not None:
            raise BridgeBroken(self.broken)
        self.requests += 1
        self._send({"q": op, "a": [self.encode(a) for a in args]})
        while True:
            msg = self._recv()
            if "r" in msg:
                if op == "call" and "b" in msg:
                    return self._copy_back(msg, args[1], args[2])
                return self.decode(msg["r"])
            if "e" in msg:
                if op == "call" and "b" in msg:
                    self._copy_back(msg, args[1], args[2])
                raise self.decode_exception(msg["e"])
            if "q" in msg:
                self._serve(msg)
                continue
            self._break("the other side sent a frame with no request or reply")

    def _copy_back(self, msg, args, kwargs):
        """Apply what a call did to the mutable arguments this side passed (they travel by value).

        A list, dict or set the callee changed is changed here in place, and a result that is one
        of them is that same object here, as if it had been passed by reference.
        """
        back = msg["b"]
        if not isinstance(back, dict):
            self._break("a malformed call reply")
        by_index = dict(enumerate(args))
        by_index.update({f"k:{k}": v for k, v in kwargs.items()})
        for key, enc in back.get("s", {}).items():
            target = by_index.get(int(key) if key.isdigit() else key)
            new = self.decode(enc)
            if type(target) is not type(new) or type(target) not in (list, dict, set):
                self._break("a call reply changed an argument into another type")
            if isinstance(target, list):
                target[:] = new
            else:
                target.clear()
                target.update(new)
        same = back.get("same")
        if same is not None:
            hit = by_index.get(int(same) if isinstance(same, int) or str(same).isdigit() else same)
            if hit is None:
                self._break("a call reply names an argument that was not passed")
            return hit
        return self.decode(msg["r"]) if "r" in msg else None

    def serve_forever(self):
        """Answer requests until the other side says ``bye`` (the agent's side)."""
        while True:
            msg = self._recv()
            if msg.get("q") == "bye":
                return
            if "q" not in msg:
                self._break("a reply arrived with no request outstanding")
            self._serve(msg)

    def close(self):
        """Tell the other side to stop serving (the judge's side, at the end)."""
        if self.broken is None:
            try:
                self._send({"q": "bye", "a": []})
            except BridgeBroken:
                pass

    def _serve(self, msg):
        if self._depth >= MAX_NESTING:
            self._break("requests nested too deeply")
        self._depth += 1
        try:
            op, raw = msg.get("q"), msg.get("a")
            if not isinstance(op, str) or not isinstance(raw, list):
                self._break("the other side sent a malformed request")
            args = [self.decode(a) for a in raw]
            mutable = _mutable_args(args) if op == "call" else {}
            try:
                result = self._perform(op, args)
                reply = {"r": self.encode(result)}
            except BridgeBroken:
                raise
            except BaseException as exc:  # the answer is the exception
                if isinstance(exc, (KeyboardInterrupt, SystemExit)) and self.side == JUDGE:
                    raise
                result = None
                reply = {"e": self.encode_exception(exc)}
            if mutable:
                back = {"s": {str(k): self.encode(v) for k, v in mutable.items()}}
                same = next((k for k, v in mutable.items() if v is result), None)
                if same is not None:
                    back["same"] = same
                reply["b"] = back
            self._send(reply)
        finally:
            self._depth -= 1

    def _perform(self, op, args):
        judge = self.side == JUDGE  # requests from the agent's side: a narrow set
        if op == "import":
            if judge:
                raise PermissionError("the judge's side exports no modules")
            import importlib

            return importlib.import_module(str(args[0]))
        if op == "call":
            target, a, kw = args
            if not isinstance(a, list) or not isinstance(kw, dict):
                self._break("malformed call")
            return target(*a, **{str(k): v for k, v in kw.items()})
        if op in ("getattr", "setattr", "delattr"):
            target, name = args[0], args[1]
            if not isinstance(name, str):
                self._break("an attribute name must be a string")
            if judge and (name.startswith("_") or op != "getattr"):
                raise AttributeError(f"the judge's objects expose only public attributes, not {name!r}")
            if op == "getattr":
                value = getattr(target, name)
                if judge and not (_bound_to(value, target) or _is_plain(value)):
                    # a public attribute can still be a way out (a generator's gi_frame, a frame's
                    # f_builtins): only the object's own methods and plain values are handed over
                    raise AttributeError(
                        f"the judge's objects expose only their methods and plain values, not {name!r} "
                        f"({type(value).__name__})"
                    )
                return value
            if op == "setattr":
                setattr(target, name, args[2])
                return None
            delattr(target, name)
            return None
        if op == "op":
            name, rest = args[0], args[1:]
            if name not in _OPS:
                self._break(f"unknown operation {name!r}")
            return self._operate(name, rest)
        self._break(f"unknown request {op!r}")

    @staticmethod
    def _operate(name, a):
        if name in _BINARY or name in _COMPARE or name in _UNARY or name in ("getitem", "setitem", "delitem"):
            return getattr(operator, name)(*a)
        simple = {
            "contains": lambda x, y: y in x,
            "len": len,
            "iter": iter,
            "next": next,
            "bool": bool,
            "hash": hash,
            "str": str,
            "repr": repr,
            "int": int,
            "float": float,
            "index": operator.index,
            "isinstance": isinstance,
            "issubclass": issubclass,
            "format": format,
            "dir": lambda x: sorted(dir(x)),
            "enter": lambda x: x.__enter__(),
            "exit": lambda x, e: x.__exit__(type(e) if e is not None else None, e, None),
        }
        return simple[name](*a)

    # ------------------------------------------------------------- values

    def encode(self, v, depth=0):
        """Plain data as itself, everything else as a reference."""
        if v is None or _exact(v, bool, str):
            return v
        if _exact(v, int):
            return v if -(2**53) < v < 2**53 else {"$": "int", "v": str(v)}
        if _exact(v, float):
            if math.isfinite(v):
                return v
            return {"$": "float", "v": repr(v)}
        if isinstance(v, Proxy) and _peer(v) is self:
            return {"$": "ref", "o": self.other, "id": object.__getattribute__(v, "_bridge_id")}
        if depth < MAX_DEPTH:
            d = depth + 1
            if _exact(v, list):
                return [self.encode(x, d) for x in v]
            if _exact(v, tuple):
                return {"$": "tuple", "v": [self.encode(x, d) for x in v]}
            if _exact(v, dict):
                return {"$": "dict", "v": [[self.encode(k, d), self.encode(x, d)] for k, x in v.items()]}
            if _exact(v, set, frozenset):
                return {"$": type(v).__name__, "v": [self.encode(x, d) for x in v]}
            if _exact(v, collections.Counter, collections.OrderedDict):
                items = [[self.encode(k, d), self.encode(x, d)] for k, x in v.items()]
                return {"$": type(v).__name__, "v": items}
            if _exact(v, collections.deque):
                return {"$": "deque", "v": [self.encode(x, d) for x in v], "m": v.maxlen}
        if _exact(v, bytes):
            return {"$": "bytes", "v": base64.b64encode(v).decode()}
        if _exact(v, datetime.datetime, datetime.date, datetime.time):
            return {"$": type(v).__name__, "v": v.isoformat()}
        if _exact(v, datetime.timedelta):
            return {"$": "timedelta", "v": [v.days, v.seconds, v.microseconds]}
        if _exact(v, decimal.Decimal):
            return {"$": "Decimal", "v": str(v)}
        if _exact(v, fractions.Fraction):
            return {"$": "Fraction", "v": [str(v.numerator), str(v.denominator)]}
        if _exact(v, complex):
            return {"$": "complex", "v": [repr(v.real), repr(v.imag)]}
        if _exact(v, range):
            return {"$": "range", "v": [v.start, v.stop, v.step]}
        if v is datetime.UTC:
            return {"$": "utc"}
        if _exact(v, datetime.timezone):
            off = v.utcoffset(None)
            return {"$": "timezone", "v": [off.days, off.seconds, off.microseconds]}
        return self._export(v, depth)

    def _export(self, v, depth):
        key = id(v)
        ref = self._export_ids.get(key)
        if ref is None:
            ref = len(self._exports) + 1
            self._exports[ref] = v
            self._export_ids[key] = ref
        out = {"$": "ref", "o": self.side, "id": ref, "t": _type_name(type(v))}
        if isinstance(v, type):
            out["k"] = "class"
            if issubclass(v, BaseException):
                out["k"] = "exc"
                out["mro"] = self._exc_mro(v)
        elif isinstance(v, _PLAIN_BASES) and depth < MAX_DEPTH:
            plain = _plain_value(v)
            if plain is not None:
                out["p"] = self.encode(plain, depth + 1)
        return out

    def _exc_mro(self, cls):
        """Bases of an exception class up to its first builtin one: (ref, name)... then the builtin's name."""
        out = []
        for base in cls.__mro__:
            if getattr(builtins, base.__name__, None) is base:
                out.append(base.__name__)
                break
            if base is not cls:
                out.append(self._export(base, MAX_DEPTH))
        return out

    def decode(self, v):
        """The inverse of :meth:`encode` for what the other side sent."""
        if v is None or isinstance(v, (bool, int, float, str)):
            return v
        if isinstance(v, list):
            return [self.decode(x) for x in v]
        if not isinstance(v, dict):
            self._break("an undecodable value")
        tag, val = v.get("$"), v.get("v")
        try:
            if tag == "ref":
                return self._resolve(v)
            if tag == "int":
                return int(val)
            if tag == "float":
                f = float(val)
                if math.isfinite(f):
                    raise ValueError(val)
                return f
            if tag == "tuple":
                return tuple(self.decode(x) for x in val)
            if tag == "dict":
                return {self.decode(k): self.decode(x) for k, x in val}
            if tag == "set":
                return {self.decode(x) for x in val}
            if tag == "frozenset":
                return frozenset(self.decode(x) for x in val)
            if tag == "Counter":
                return collections.Counter({self.decode(k): self.decode(x) for k, x in val})
            if tag == "OrderedDict":
                return collections.OrderedDict((self.decode(k), self.decode(x)) for k, x in val)
            if tag == "deque":
                m = v.get("m")
                return collections.deque((self.decode(x) for x in val), None if m is None else int(m))
            if tag == "bytes":
                return base64.b64decode(val, validate=True)
            if tag == "datetime":
                return datetime.datetime.fromisoformat(val)
            if tag == "date":
                return datetime.date.fromisoformat(val)
            if tag == "time":
                return datetime.time.fromisoformat(val)
            if tag == "timedelta":
                return datetime.timedelta(days=val[0], seconds=val[1], microseconds=val[2])
            if tag == "Decimal":
                return decimal.Decimal(val)
            if tag == "Fraction":
                return fractions.Fraction(int(val[0]), int(val[1]))
            if tag == "complex":
                return complex(float(val[0]), float(val[1]))
            if tag == "range":
                return range(int(val[0]), int(val[1]), int(val[2]))
            if tag == "utc":
                return datetime.UTC
            if tag == "timezone":
                return datetime.timezone(datetime.timedelta(days=val[0], seconds=val[1], microseconds=val[2]))
        except BridgeBroken:
            raise
        except (TypeError, ValueError, KeyError, IndexError, OverflowError, ArithmeticError) as exc:
            self._break(f"an undecodable {tag} value ({type(exc).__name__})")
        except RecursionError:
            self._break("a value nested too deeply")
        self._break(f"an unknown value tag {tag!r}")

    def _resolve(self, v):
        owner, ref = v.get("o"), v.get("id")
        if not isinstance(ref, int) or isinstance(ref, bool):
            self._break("a reference without an id")
        if owner == self.side:
            if ref not in self._exports:
                self._break(f"a reference to object {ref}, which this side never exported")
            return self._exports[ref]
        if owner != self.other:
            self._break("a reference with an unknown owner")
        if ref in self._proxies:
            return self._proxies[ref]
        if v.get("k") == "exc":
            cls = self._exception_class(v)
            self._proxies[ref] = cls
            return cls
        p = Proxy.__new__(Proxy)
        object.__setattr__(p, "_bridge_peer", self)
        object.__setattr__(p, "_bridge_id", ref)
        object.__setattr__(p, "_bridge_type", str(v.get("t", "object"))[:200])
        object.__setattr__(p, "_bridge_plain", self.decode(v["p"]) if "p" in v else _NO_PLAIN)
        self._proxies[ref] = p
        return p

    def _exception_class(self, v):
        """A real local exception class for the other side's, so ``pytest.raises`` works."""
        ref = v["id"]
        if ref in self._exc_classes:
            return self._exc_classes[ref]
        mro = v.get("mro")
        if not isinstance(mro, list) or not mro or not isinstance(mro[-1], str):
            self._break("an exception class without its bases")
        builtin = getattr(builtins, mro[-1], None)
        if not (isinstance(builtin, type) and issubclass(builtin, BaseException)):
            self._break(f"an exception class based on {mro[-1]!r}")
        if issubclass(builtin, (KeyboardInterrupt, SystemExit, GeneratorExit)):
            builtin = Exception  # the agent's side cannot make the judge exit or stop
        bases = []
        for b in mro[:-1][:1]:  # the nearest agent-side base; its own bases follow from it
            base = self.decode(b)
            if isinstance(base, type) and issubclass(base, RemoteException):
                bases.append(base)
        name = str(v.get("t", "RemoteError")).rsplit(".", 1)[-1][:100] or "RemoteError"
        if not bases:
            bases = [RemoteException, builtin] if builtin is not BaseException else [RemoteException]
        cls = type(name, tuple(bases), {"__module__": "remote", "_bridge_class": True})
        self._exc_classes[ref] = cls
        return cls

    def encode_exception(self, exc):
        """An exception raised on this side, for the other side to raise again."""
        cls = type(exc)
        is_builtin = getattr(builtins, cls.__name__, None) is cls
        try:
            text = str(exc)
        except Exception:  # the agent's __str__ failing is its answer too
            text = f"<{cls.__name__}>"
        out = {"s": text[:4000]}
        if is_builtin:
            out["b"] = cls.__name__
            try:
                out["args"] = [self.encode(a) for a in exc.args[:8]]
            except Exception:
                out["args"] = [text[:4000]]
        else:
            out["c"] = self.encode(cls)
            out["x"] = self._export(exc, MAX_DEPTH)
        cause = exc.__cause__
        if cause is not None and cause is not exc:
            try:
                out["cause"] = self.encode_exception(cause)
            except RecursionError:
                pass
        return out

    def decode_exception(self, e):
        """The local exception to raise for one the other side sent."""
        if not isinstance(e, dict):
            self._break("a malformed exception")
        text = str(e.get("s", ""))
        if "b" in e:
            cls = getattr(builtins, str(e["b"]), None)
            if not (isinstance(cls, type) and issubclass(cls, BaseException)):
                self._break("an exception of an unknown builtin class")
            if issubclass(cls, (KeyboardInterrupt, SystemExit, GeneratorExit)):
                cls = RemoteError
            raw = e.get("args")
            args = [self.decode(a) for a in raw] if isinstance(raw, list) else [text]
            try:
                exc = cls(*args)
            except Exception:
                exc = cls(text) if cls is not RemoteError else RemoteError(text)
        else:
            cls = self.decode(e.get("c"))
            if not (isinstance(cls, type) and issubclass(cls, RemoteException)):
                self._break("an exception whose class is not an exception class")
            exc = cls.__new__(cls)
            exc.args = (text,)
            exc._bridge_str = text
            exc._bridge_ref = self.decode(e.get("x"))
        if isinstance(e.get("cause"), dict):
            exc.__cause__ = self.decode_exception(e["cause"])
        return exc


def _bound_to(value, target):
    """A method bound to ``target`` (Python or builtin), nothing else."""
    return callable(value) and getattr(value, "__self__", None) is target and not isinstance(value, type)


def _is_plain(value, depth=0):
    """Plain data all the way down (what crosses by value)."""
    if value is None or type(value) in (bool, int, float, str, bytes, complex, range):
        return True
    if depth > MAX_DEPTH:
        return False
    if type(value) in (list, tuple, set, frozenset):
        return all(_is_plain(v, depth + 1) for v in value)
    if type(value) is dict:
        return all(_is_plain(k, depth + 1) and _is_plain(v, depth + 1) for k, v in value.items())
    return type(value) in (
        datetime.datetime,
        datetime.date,
        datetime.time,
        datetime.timedelta,
        decimal.Decimal,
        fractions.Fraction,
    )


def _mutable_args(args):
    """The list/dict/set arguments of a ``call`` request, by position (``k:name`` for keywords)."""
    if len(args) != 3 or not isinstance(args[1], list) or not isinstance(args[2], dict):
        return {}
    out = {i: a for i, a in enumerate(args[1]) if type(a) in (list, dict, set)}
    out.update({f"k:{k}": a for k, a in args[2].items() if type(a) in (list, dict, set)})
    return out


def _type_name(cls):
    return f"{getattr(cls, '__module__', '?')}.{getattr(cls, '__qualname__', '?')}"


def _plain_value(v):
    """An instance of a plain type as that type, by the base type's own methods (no overrides)."""
    try:
        if isinstance(v, bool):
            return None
        if isinstance(v, str):
            return str.__str__(v)
        if isinstance(v, int):
            return int.__int__(v)
        if isinstance(v, float):
            return float.__float__(v)
        if isinstance(v, bytes):
            return bytes.__getitem__(v, slice(None))
        if isinstance(v, tuple):
            return tuple.__getitem__(v, slice(None))
        if isinstance(v, list):
            return list.__getitem__(v, slice(None))
        if isinstance(v, dict):
            return dict.copy(v)
        if isinstance(v, frozenset):
            return frozenset.copy(v)
        if isinstance(v, set):
            return set.copy(v)
    except Exception:
        return None
    return None


# --------------------------------------------------------------------------- the agent's side


def source_only_imports(root):
    """Modules under ``root`` are imported from their source only, never from bytecode.

    A ``.pyc`` in ``__pycache__`` that claims its source's size and time but holds other code
    would run instead of the source the judge reads; a sourceless ``.pyc`` or a native module
    would run code no judge read at all. Under ``root`` only ``.py`` files are importable, and
    each is compiled from its text; the interpreter's own modules keep their caches.
    """
    import importlib.machinery

    class SourceOnly(importlib.machinery.SourceFileLoader):
        def get_code(self, fullname):
            path = self.get_filename(fullname)
            return self.source_to_code(self.get_data(path), path)

    factory = importlib.machinery.FileFinder.path_hook((SourceOnly, [".py"]))
    root = os.path.abspath(root)

    def hook(path):
        full = os.path.abspath(path or os.getcwd())
        if full == root or full.startswith(root + os.sep):
            return factory(full)
        raise ImportError("not under " + root)

    sys.dont_write_bytecode = True
    sys.path_hooks.insert(0, hook)
    sys.path_importer_cache.clear()


def fix_path(workspace):
    """The server's import path, fixed by the judge: the workspace, then the interpreter's own.

    Started with ``-I -S``: no ``PYTHON*`` variables, no user site, no ``.pth`` file of any
    site directory ran. The image's site directories (read-only, never the agent's) are put back
    by name; nothing else, so a directory the agent's code appends later (its ``/tmp``, emptied by
    the judge) holds nothing the judge did not read.
    """
    import site

    system = [p for p in sys.path if p and os.path.isabs(p) and not _under(p, workspace)]
    extra = [p for p in site.getsitepackages() if os.path.isdir(p) and not _under(p, workspace)]
    sys.path[:] = [workspace] + system + [p for p in extra if p not in system]


def _under(path, root):
    path, root = os.path.abspath(path), os.path.abspath(root)
    return path == root or path.startswith(root + os.sep)


def serve_fifos(channel_dir):
    """Entry point in the sandbox: serve the judge over the two named pipes in ``channel_dir``.

    ``to`` carries the judge's requests, ``from`` the answers. The agent's own output
    goes to the exec's stdout/stderr, never into the channel. The process ends with
    ``os._exit`` once the judge says ``bye`` (or the channel breaks), so threads the
    agent's code started cannot keep it alive.
    """
    import errno
    import time

    rfd = os.open(os.path.join(channel_dir, "to"), os.O_RDONLY)
    deadline = time.monotonic() + 30
    while True:  # the judge holds its reading end open before it opens ours: this is quick
        try:
            wfd = os.open(os.path.join(channel_dir, "from"), os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError as exc:
            if exc.errno != errno.ENXIO or time.monotonic() > deadline:
                os._exit(3)
            time.sleep(0.005)
    os.set_blocking(wfd, True)
    workspace = os.path.dirname(os.path.abspath(channel_dir))
    fix_path(workspace)
    source_only_imports(workspace)
    peer = Peer(rfd, wfd, AGENT)
    code = 0
    try:
        peer.serve_forever()
    except BridgeBroken:
        code = 3
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


if __name__ == "__main__":
    serve_fifos(sys.argv[1])
