"""The server's address checks: ports, actor targets and the OS's reason a bind fails."""

import socket

import pytest

from accelrl.bridge.address import (
    AddressUnavailable,
    bind_problem,
    check_bindable,
    check_server_target,
    grpc_address,
    parse_port,
)


def foreign_address() -> str:
    """An IPv4 address that is not this host's (documentation ranges are not always: this
    sandbox's own interface is 192.0.2.2)."""
    for host in ("198.51.100.1", "203.0.113.1", "192.0.2.1", "240.0.0.1"):
        with socket.socket() as probe:
            try:
                probe.bind((host, 0))
            except OSError:
                return host
    raise AssertionError("every candidate address is this host's")


def test_ports_outside_0_to_65535_are_refused_rather_than_wrapped():
    assert parse_port("0") == 0 and parse_port("65535") == 65535
    for text, message in [
        ("65536", "port 65536 is not in 0..65535"),
        ("99999", "port 99999 is not in 0..65535"),
        ("-1", "port -1 is not in 0..65535"),
        ("http", "'http' is not a port number"),
    ]:
        with pytest.raises(ValueError, match=message):
            parse_port(text)
    with pytest.raises(ValueError, match="port 0 is not in 1..65535"):
        parse_port("0", allow_zero=False)


def test_actor_targets_must_end_in_a_port():
    for target in (
        "localhost:50051",
        "10.0.0.2:1",
        "[::1]:50051",
        "dns:///learner:50051",
        "unix:///run/learner.sock",
    ):
        check_server_target(target)
    for target, message in [
        ("localhost", "'localhost' is not HOST:PORT"),
        (":50051", "':50051' is not HOST:PORT"),
        ("localhost:0", "port 0 is not in 1..65535"),
        ("localhost:70000", "port 70000 is not in 1..65535"),
    ]:
        with pytest.raises(ValueError, match=message):
            check_server_target(target)


def test_ipv6_literals_are_bracketed_for_grpc():
    assert grpc_address("127.0.0.1", 5) == "127.0.0.1:5"
    assert grpc_address("::1", 5) == "[::1]:5"


def test_bind_problems_name_the_os_reason():
    assert bind_problem("127.0.0.1", 0) is None
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        in_use = f"Address already in use (port {port} on 127.0.0.1)"
        assert bind_problem("127.0.0.1", port) == in_use
        with pytest.raises(AddressUnavailable, match=f"cannot listen on 127.0.0.1:{port}: Address"):
            check_bindable("127.0.0.1", port)
    host = foreign_address()
    assert bind_problem(host, 0) == f"Cannot assign requested address (port 0 on {host})"
    assert bind_problem("127.0.0.1", 65536) == "port 65536 is not in 0..65535"


def test_a_name_with_several_addresses_is_usable_when_any_of_them_is(monkeypatch):
    # as gRPC binds every address a name resolves to and serves when one of them binds
    def resolve(*addresses):
        found = [(socket.AF_INET, socket.SOCK_STREAM, 6, "", address) for address in addresses]
        monkeypatch.setattr(socket, "getaddrinfo", lambda *args, **kwargs: found)

    foreign = foreign_address()
    resolve((foreign, 0), ("127.0.0.1", 0))
    assert bind_problem("learner", 0) is None
    resolve((foreign, 0), (foreign, 0))
    assert bind_problem("learner", 0) == "Cannot assign requested address (port 0 on learner)"


def test_serve_refuses_an_unusable_address_before_compiling_or_writing(tmp_path):
    from bridge_helpers import run_cli

    run = tmp_path / "run"
    out = run_cli("serve", "cartpole_vtrace_bridge", "--port", "99999", "--run-dir", str(run))
    assert out.returncode == 2
    assert "argument --port: port 99999 is not in 0..65535" in out.stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = run_cli("serve", "cartpole_vtrace_bridge", "--port", str(port), "--run-dir", str(run))
    assert out.returncode == 1, out.stderr
    assert out.stderr.strip().endswith(
        f"accelrl: error: cannot listen on 127.0.0.1:{port}: Address already in use "
        f"(port {port} on 127.0.0.1)"
    )
    assert "Traceback" not in out.stderr
    out = run_cli("serve", "cartpole_vtrace_bridge", "--run-dir", str(run), "bridge.tls_cert=c.pem")
    assert out.returncode == 2
    assert "bridge.tls_cert and bridge.tls_key go together" in out.stderr
    assert not run.exists()
