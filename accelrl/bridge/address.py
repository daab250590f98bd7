"""The server's listening address: formatting it for gRPC and saying why it cannot be bound.

gRPC's own bind failure is a bare "Failed to bind to address" with the reason only in its
debug log, and it silently takes a port above 65535 modulo 65536. So the server checks the
address with the OS first and names the problem.
"""

from __future__ import annotations

import socket


class AddressUnavailable(RuntimeError):
    """The server cannot listen on the requested address."""


def grpc_address(host: str, port: int) -> str:
    """`host:port` as gRPC wants it (IPv6 literals in brackets)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def parse_port(text: str, allow_zero: bool = True) -> int:
    """A TCP port from the command line (0 = any free port where `allow_zero`), or ValueError."""
    try:
        port = int(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a port number") from None
    _check_range(port, 0 if allow_zero else 1)
    return port


def _check_range(port: int, low: int = 0) -> None:
    if not low <= port <= 65535:
        raise ValueError(f"port {port} is not in {low}..65535")


def check_server_target(target: str) -> None:
    """ValueError unless `target` reads HOST:PORT (a gRPC target ending in a valid port) or
    names a unix socket (`unix:PATH`, `unix-abstract:NAME`, e.g. a local proxy's)."""
    if target.startswith(("unix:", "unix-abstract:")):
        return
    host, colon, port = target.rpartition(":")
    if not colon or not host:
        raise ValueError(f"{target!r} is not HOST:PORT")
    parse_port(port, allow_zero=False)


def bind_problem(host: str, port: int) -> str | None:
    """Why a TCP server could not listen on (host, port) now, or None when it could.

    Like gRPC, a name that resolves to several addresses (localhost: ::1 and 127.0.0.1) is
    usable when any of them is; the reason given is the first address's.
    """
    try:
        _check_range(port)
        candidates = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except ValueError as error:
        return str(error)
    except socket.gaierror as error:
        return f"cannot resolve {host!r} ({error.strerror})"
    reasons = []
    for family, kind, proto, _, address in candidates:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gRPC does
            try:
                probe.bind(address)
            except OSError as error:
                reasons.append(f"{error.strerror} (port {port} on {host})")
            else:
                return None
    return reasons[0]


def check_bindable(host: str, port: int) -> None:
    """AddressUnavailable naming the reason unless (host, port) can be listened on."""
    problem = bind_problem(host, port)
    if problem is not None:
        raise AddressUnavailable(f"cannot listen on {grpc_address(host, port)}: {problem}")
