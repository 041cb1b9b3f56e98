//! TCP and UDP sockets as the network workloads open them: bound to the
//! role's address, buffers and Nagle set as netperf sets them.

use crate::roles::RoleCtx;
use anyhow::{Context, Result};
use std::io;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::Duration;

/// Sets SO_SNDBUF/SO_RCVBUF (when `bytes` > 0) and TCP_NODELAY (when asked).
pub(crate) fn tune(fd: &impl AsRawFd, bytes: u64, nodelay: bool) -> Result<()> {
    use nix::sys::socket::{setsockopt, sockopt};
    // SAFETY: the descriptor is owned by the caller's socket for the call.
    let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd.as_raw_fd()) };
    if bytes > 0 {
        let b = usize::try_from(bytes).context("sockbuf too large")?;
        setsockopt(&fd, sockopt::SndBuf, &b).context("SO_SNDBUF")?;
        setsockopt(&fd, sockopt::RcvBuf, &b).context("SO_RCVBUF")?;
    }
    if nodelay {
        setsockopt(&fd, sockopt::TcpNoDelay, &true).context("TCP_NODELAY")?;
    }
    Ok(())
}

pub(crate) fn family_of(ip: &IpAddr) -> nix::sys::socket::AddressFamily {
    if ip.is_ipv6() {
        nix::sys::socket::AddressFamily::Inet6
    } else {
        nix::sys::socket::AddressFamily::Inet
    }
}

/// The role's bind address.
pub(crate) fn bind_ip(ctx: &RoleCtx) -> Result<IpAddr> {
    ctx.bind
        .parse()
        .with_context(|| format!("bad bind address {}", ctx.bind))
}

/// A socket of `ty` bound to the role's address, port chosen by the kernel,
/// with its buffers set before `listen`/use so accepted sockets inherit them
/// (as netserver does).
pub(crate) fn bound_socket(
    ctx: &RoleCtx,
    ty: nix::sys::socket::SockType,
    sockbuf: u64,
) -> Result<OwnedFd> {
    use nix::sys::socket::{bind, setsockopt, socket, sockopt, SockFlag, SockaddrStorage};
    let ip = bind_ip(ctx)?;
    let fd = socket(family_of(&ip), ty, SockFlag::SOCK_CLOEXEC, None).context("socket")?;
    setsockopt(&fd, sockopt::ReuseAddr, &true).context("SO_REUSEADDR")?;
    tune(&fd, sockbuf, false)?;
    let addr = SockaddrStorage::from(SocketAddr::new(ip, 0));
    bind(fd.as_raw_fd(), &addr).with_context(|| format!("bind {ip}"))?;
    Ok(fd)
}

/// A listener on the role's bind address (see [`bound_socket`]).
pub(crate) fn listen(ctx: &RoleCtx, sockbuf: u64) -> Result<TcpListener> {
    use nix::sys::socket::{listen as nix_listen, Backlog, SockType};
    let fd = bound_socket(ctx, SockType::Stream, sockbuf)?;
    nix_listen(&fd, Backlog::new(4096).unwrap_or(Backlog::MAXCONN)).context("listen")?;
    Ok(TcpListener::from(fd))
}

/// How a load connection is opened.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Dial {
    pub(crate) sockbuf: u64,
    pub(crate) nodelay: bool,
    /// Send and receive timeouts: two more system calls, worth it for a
    /// long-lived connection, not for one per transaction.
    pub(crate) timeout: Option<Duration>,
}

impl Dial {
    pub(crate) fn connect(&self, addr: SocketAddr) -> io::Result<TcpStream> {
        use nix::sys::socket::{connect, socket, SockFlag, SockType, SockaddrStorage};
        let fd = socket(
            family_of(&addr.ip()),
            SockType::Stream,
            SockFlag::SOCK_CLOEXEC,
            None,
        )?;
        // Buffers before connect, so the window scale is negotiated for them.
        tune(&fd, self.sockbuf, self.nodelay).map_err(io::Error::other)?;
        connect(fd.as_raw_fd(), &SockaddrStorage::from(addr))?;
        let s = TcpStream::from(fd);
        if self.timeout.is_some() {
            s.set_read_timeout(self.timeout)?;
            s.set_write_timeout(self.timeout)?;
        }
        Ok(s)
    }
}
