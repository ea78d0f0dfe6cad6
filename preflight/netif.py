"""The host's network interfaces, and which of them NCCL and gloo would use.

``NCCL_SOCKET_IFNAME`` (NCCL documentation, "Environment Variables", NCCL_SOCKET_IFNAME: "a list
of prefixes to filter interfaces"; ``^`` excludes the listed prefixes; ``=`` makes the names
exact, also after ``^``; e.g. ``eth``, ``=eth0``, ``^docker``, ``^=docker0``; the list is
comma-separated and an entry may carry a ``:port`` suffix, as in NCCL_IB_HCA).

``GLOO_SOCKET_IFNAME`` (PyTorch documentation, torch.distributed, "Choosing the network interface
to use": ``export GLOO_SOCKET_IFNAME=eth0``, several as ``eth0,eth1,eth2,eth3``): exact
interface names, each of which must exist (gloo looks each one up by name).
"""

import os
import socket
from typing import List, Optional, Tuple

__all__ = ["interfaces", "nccl_matches", "gloo_missing", "check_ifname"]


def interfaces() -> List[str]:
    """Names of this host's network interfaces, sorted: ``socket.if_nameindex()``, else the
    entries of ``/sys/class/net``; [] when neither can be read."""
    try:
        return sorted({name for _, name in socket.if_nameindex()})
    except (OSError, AttributeError):
        pass
    try:
        return sorted(os.listdir("/sys/class/net"))
    except OSError:
        return []


def _parse(spec: str) -> Tuple[bool, bool, List[str]]:
    """(exclude, exact, names) of an NCCL interface list."""
    s = spec.strip()
    exclude = s.startswith("^")
    if exclude:
        s = s[1:]
    exact = s.startswith("=")
    if exact:
        s = s[1:]
    names = []
    for entry in s.split(","):
        name = entry.split(":", 1)[0].strip()
        if name:
            names.append(name)
    return exclude, exact, names


def nccl_matches(spec: str, names: List[str]) -> List[str]:
    """The interfaces among ``names`` that ``NCCL_SOCKET_IFNAME=spec`` selects (rules in the
    module docstring): prefix match unless ``=``, inverted by ``^``."""
    exclude, exact, wanted = _parse(spec)

    def hit(name: str) -> bool:
        return any(name == w if exact else name.startswith(w) for w in wanted)

    return [n for n in names if hit(n) != exclude]


def gloo_missing(spec: str, names: List[str]) -> List[str]:
    """The entries of ``GLOO_SOCKET_IFNAME=spec`` (comma-separated exact names) that are not among ``names``."""
    return [w.strip() for w in spec.split(",") if w.strip() and w.strip() not in names]


def check_ifname(var: str, value: str, names: Optional[List[str]] = None) -> Optional[str]:
    """None when ``var=value`` (NCCL_SOCKET_IFNAME or GLOO_SOCKET_IFNAME) can work on this host
    (``names``: its interfaces, default :func:`interfaces`), else a one-line reason naming the
    value and the interfaces there are. An unknown ``var`` or an unreadable interface list: None."""
    if not value.strip():  # set but empty: NCCL and torch treat it as unset
        return None
    names = interfaces() if names is None else names
    if not names:
        return None
    have = ", ".join(names)
    if var == "NCCL_SOCKET_IFNAME":
        exclude, _, wanted = _parse(value)
        if not wanted:
            return "%s=%s names no interface (have: %s)" % (var, value, have)
        if not nccl_matches(value, names):
            if exclude:
                return "%s=%s excludes every interface of this host (have: %s)" % (var, value, have)
            return "%s=%s matches no interface (have: %s)" % (var, value, have)
        return None
    if var == "GLOO_SOCKET_IFNAME":
        missing = gloo_missing(value, names)
        if missing:
            return "%s=%s: no interface named %s (gloo needs exact names; have: %s)" % (
                var, value, ", ".join(missing), have)
    return None
