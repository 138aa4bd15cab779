//! The listening socket, and the open-file limit that bounds how many connections it can hold.
//!
//! `[::]:P` is bound dual-stack (IPV6_V6ONLY off) so it also takes IPv4 clients, whatever the
//! system default (`net.ipv6.bindv6only`, always on for some BSDs): "listen on every address"
//! should mean both families. IPv4 peers then show up as IPv4-mapped addresses
//! (`::ffff:127.0.0.1`), which the gate counts as loopback.

use std::io;
use std::net::SocketAddr;

use socket2::{Domain, Socket, Type};
use tokio::net::TcpListener;

/// Pending connections the kernel may queue before `accept`.
const BACKLOG: i32 = 1024;

/// Bind `addr` (`IP:PORT`, or `host:PORT`, the first address that binds wins).
pub async fn bind(addr: &str) -> io::Result<TcpListener> {
    let mut last = None;
    for candidate in tokio::net::lookup_host(addr).await? {
        match bind_one(candidate) {
            Ok(listener) => return Ok(listener),
            Err(err) => last = Some(err),
        }
    }
    Err(last.unwrap_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "the address resolves to nothing",
        )
    }))
}

fn bind_one(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    if addr.is_ipv6() {
        socket.set_only_v6(false)?;
    }
    // As tokio and std do: a restarted gateway can bind while old connections linger in
    // TIME_WAIT.
    #[cfg(unix)]
    socket.set_reuse_address(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(BACKLOG)?;
    TcpListener::from_std(socket.into())
}

/// Raise the soft open-file limit to the hard one and return the limit now in force (`None`
/// where the platform has none to read). Every connection is a file: with the common soft
/// limit of 1024, a thousand idle clients would leave no descriptor for the database, the
/// platforms or `/healthz`.
pub fn raise_open_file_limit() -> Option<u64> {
    #[cfg(unix)]
    {
        use rustix::process::{Resource, getrlimit, setrlimit};
        let mut limit = getrlimit(Resource::Nofile);
        if limit.current != limit.maximum {
            let raised = rustix::process::Rlimit {
                current: limit.maximum,
                maximum: limit.maximum,
            };
            match setrlimit(Resource::Nofile, raised) {
                Ok(()) => limit = getrlimit(Resource::Nofile),
                Err(err) => tracing::warn!(%err, "could not raise the open-file limit"),
            }
        }
        // `None` is unlimited.
        Some(limit.current.unwrap_or(u64::MAX))
    }
    #[cfg(not(unix))]
    {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_port_zero_address_binds() {
        let listener = bind("127.0.0.1:0").await.unwrap();
        assert_ne!(listener.local_addr().unwrap().port(), 0);
        assert!(bind("not an address").await.is_err());
    }

    #[test]
    fn the_soft_limit_ends_at_the_hard_one() {
        let now = raise_open_file_limit();
        #[cfg(unix)]
        {
            let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
            assert_eq!(limit.current, limit.maximum);
            assert_eq!(now, Some(limit.current.unwrap_or(u64::MAX)));
        }
        #[cfg(not(unix))]
        assert_eq!(now, None);
    }
}
