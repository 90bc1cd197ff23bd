"""What a sandbox's network namespace saw: every packet that tried to leave it.

A sandbox has no network, so an attempt to reach one fails, and a failure
alone says nothing afterwards (the output can be discarded). To *observe*
attempts, the namespace gets what a real network would look like to a
process, and a witness the process cannot touch:

- a veth pair with an address and a default route, IPv4 and IPv6, so that a
  ``connect()`` or ``sendto()`` to any address makes a packet (without a
  route the kernel refuses it before any packet exists);
- an nftables table on the output hook that records each TCP/UDP
  destination in a set, counts the packets (ICMP echo too) and rejects them
  at once: the caller sees "connection refused" or "port unreachable", never a
  timeout, and nothing leaves (the veth's peer is in the same namespace);
- name lookups sent to a resolver on the sandbox's own loopback are counted
  apart (DNS over ``lo``).

The host's root creates the namespace's devices and rules; the sandbox's
processes hold no capability in it (a container drops all; bubblewrap runs
them in a user namespace that does not own it), so they can neither read nor
reset the witness. Kernel chatter (neighbour discovery, router solicitation)
is dropped uncounted: only what a process sent counts.
"""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
from dataclasses import dataclass, field
from typing import Any

from sandboxes.errors import SandboxError

TABLE = "trajlake_watch"
log = logging.getLogger(__name__)

_RULES = f"""
table inet {TABLE} {{
  set dest4 {{ type ipv4_addr . inet_proto . inet_service; size 256; flags dynamic; }}
  set dest6 {{ type ipv6_addr . inet_proto . inet_service; size 256; flags dynamic; }}
  chain out {{
    type filter hook output priority 0; policy accept;
    oifname "lo" meta l4proto {{ tcp, udp }} th dport 53 counter comment "lookup"
    oifname "lo" accept
    meta nfproto ipv4 meta l4proto {{ tcp, udp }} update @dest4 {{ ip daddr . meta l4proto . th dport }}
    meta nfproto ipv6 meta l4proto {{ tcp, udp }} update @dest6 {{ ip6 daddr . meta l4proto . th dport }}
    meta l4proto {{ tcp, udp }} counter reject comment "sent"
    icmp type echo-request counter reject comment "sent"
    icmpv6 type echo-request counter reject comment "sent"
    drop
  }}
}}
"""
_DEVICES = [
    ["ip", "link", "set", "lo", "up"],
    ["ip", "link", "add", "tlw0", "type", "veth", "peer", "name", "tlw1"],
    ["ip", "link", "set", "tlw0", "up"],
    ["ip", "link", "set", "tlw1", "up"],
    ["ip", "addr", "add", "10.254.0.2/24", "dev", "tlw0"],
    ["ip", "route", "add", "default", "dev", "tlw0"],
]
_DEVICES_V6 = [
    # a container's namespace starts with IPv6 disabled; the device can have it back
    ["sh", "-c", "for d in lo tlw0; do echo 0 > /proc/sys/net/ipv6/conf/$d/disable_ipv6; done"],
    ["ip", "-6", "addr", "add", "fd00:254::2/64", "dev", "tlw0", "nodad"],
    ["ip", "-6", "route", "add", "default", "dev", "tlw0"],
]


@dataclass(frozen=True)
class NetworkReport:
    """What the namespace recorded since it was set up or last cleared."""

    packets: int
    """Packets that tried to leave the sandbox (all rejected)."""
    lookups: int
    """DNS packets sent to a resolver on the sandbox's loopback."""
    destinations: tuple[str, ...] = field(default=())
    """``proto address:port`` of each distinct TCP/UDP destination (at most 256 per family)."""

    @property
    def attempted(self) -> bool:
        """Anything at all tried to reach a network."""
        return self.packets > 0 or self.lookups > 0

    def describe(self) -> str:
        """One line for a flag's evidence."""
        parts = []
        if self.packets:
            dests = ", ".join(self.destinations[:8]) + (" ..." if len(self.destinations) > 8 else "")
            parts.append(f"{self.packets} packet(s) out of the sandbox" + (f" to {dests}" if dests else ""))
        if self.lookups:
            parts.append(f"{self.lookups} DNS packet(s) to the sandbox's loopback")
        return "; ".join(parts) or "none"


def available() -> bool:
    """``ip`` and ``nft`` are installed (they are part of what the backends need as root)."""
    return shutil.which("ip") is not None and shutil.which("nft") is not None


class NetWatch:
    """The witness in one network namespace, addressed by a path (``/proc/PID/ns/net``, ``/run/netns/X``)."""

    def __init__(self, netns: str) -> None:
        self.netns = netns

    def _run(self, argv: list[str], *, stdin: str | None = None) -> str:
        try:
            p = subprocess.run(
                ["nsenter", f"--net={self.netns}", *argv],
                input=stdin,
                capture_output=True,
                text=True,
                timeout=20,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SandboxError(f"cannot run {argv[0]} in the sandbox's network namespace: {exc}") from exc
        if p.returncode != 0:
            why = p.stderr.strip() or f"exit {p.returncode}"
            raise SandboxError(f"{' '.join(argv)} in the sandbox's network namespace failed: {why}")
        return p.stdout

    def install(self) -> None:
        """Add the rules, then the devices and routes (once per namespace).

        The rules come first, so there is never a route without the rejection (which
        would turn refused connections into timeouts); IPv6 is added where the
        namespace allows it (without it, IPv6 attempts fail with no route and no packet).
        """
        self._run(["nft", "-f", "-"], stdin=_RULES)
        try:
            for argv in _DEVICES:
                self._run(argv)
        except SandboxError:
            self._undo()
            raise
        for argv in _DEVICES_V6:
            try:
                self._run(argv)
            except SandboxError:
                break

    def _undo(self) -> None:
        for argv in (["ip", "link", "del", "tlw0"], ["nft", "delete", "table", "inet", TABLE]):
            try:
                self._run(argv)
            except SandboxError:
                pass

    def clear(self) -> None:
        """Forget what was seen (a reset): the table replaced by a fresh one in one transaction."""
        self._run(["nft", "-f", "-"], stdin=f"delete table inet {TABLE}\n{_RULES}")

    def report(self) -> NetworkReport:
        """What was recorded so far."""
        raw = self._run(["nft", "-j", "list", "table", "inet", TABLE])
        try:
            items = json.loads(raw)["nftables"]
        except (ValueError, KeyError, TypeError) as exc:
            raise SandboxError(f"unreadable nftables listing of the sandbox's namespace: {exc}") from exc
        return _parse(items)


def _parse(items: list[dict[str, Any]]) -> NetworkReport:
    packets = lookups = 0
    dests: list[str] = []
    for item in items:
        if "rule" in item:
            rule = item["rule"]
            n = sum(int(e["counter"]["packets"]) for e in rule.get("expr", []) if "counter" in e)
            if rule.get("comment") == "sent":
                packets += n
            elif rule.get("comment") == "lookup":
                lookups += n
        elif "set" in item:
            for elem in item["set"].get("elem", []) or []:
                value = elem.get("elem", {}).get("val", elem) if isinstance(elem, dict) else elem
                concat = value.get("concat") if isinstance(value, dict) else None
                if isinstance(concat, list) and len(concat) == 3:
                    addr, proto, port = concat
                    host = f"[{addr}]" if ":" in str(addr) else str(addr)
                    dests.append(f"{proto} {host}:{port}")
    return NetworkReport(packets=packets, lookups=lookups, destinations=tuple(sorted(dests)))


_warned = False


def watch_namespace(netns: str, sandbox_id: str) -> NetWatch | None:
    """Install the witness in ``netns``; ``None`` (logged once) where this host cannot.

    Without ``ip``/``nft`` or nf_tables in the kernel the sandbox still has no
    network; only the observation is missing, and judges fall back to what the
    trajectory shows.
    """
    global _warned
    if not available():
        reason = "ip or nft is not installed"
    else:
        watch = NetWatch(netns)
        try:
            watch.install()
            return watch
        except SandboxError as exc:
            reason = str(exc)
    if not _warned:
        _warned = True
        log.warning("sandbox %s: network attempts are refused but not observed: %s", sandbox_id, reason)
    return None
