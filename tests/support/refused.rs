//! An address where nothing answers, for the tests of a server that is gone. Shared by
//! `tests/cli`, `tests/client` and `tests/service` through `#[path]`.

use std::net::SocketAddr;

use socket2::{Domain, Socket, Type};

/// A socket bound to a free port of 127.0.0.1 without `listen`, and its address: a connection
/// to it is refused at once, and no other test's server can take the port while the socket
/// lives (a port freed by dropping a listener or stopping a service can be handed to the next
/// server that binds port 0, so a test that freed one could find another test's server there).
pub fn refused_addr() -> (Socket, SocketAddr) {
    let socket = Socket::new(Domain::IPV4, Type::STREAM, None).expect("a socket");
    socket
        .bind(&SocketAddr::from(([127, 0, 0, 1], 0)).into())
        .expect("bind 127.0.0.1:0");
    let addr = socket
        .local_addr()
        .expect("its address")
        .as_socket()
        .expect("an IP address");
    (socket, addr)
}
