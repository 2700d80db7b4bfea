//! Keeping the provider's sockets out of the processes a rank starts.
//!
//! libfabric 1.17's tcp provider opens its sockets without close-on-exec: a child the program
//! starts (`std::process::Command`, a shell) inherited the listening sockets and every
//! connection of the rank's endpoints, and held them open after the rank was gone. The provider
//! gives no hook at the moment it opens a socket, so they are marked afterwards
//! ([`close_on_exec`]), once a window's pairs are connected: a child started before that, or by
//! another thread while a connection is made, still inherits what is open then. The provider's
//! internal socket pairs and epoll sets, whose other ends no other process holds, are not
//! marked (nothing tells them from the program's own): a child of a rank of 2 over tcp still
//! inherits 12 and 4 of them.
//!
//! The provider's sockets are told from the program's own by their addresses: a socket whose
//! local or remote address is the address of one of the job's endpoints (which only the
//! provider listens at) is the provider's.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::RawFd;

/// An endpoint address as the tcp provider gives it (`struct sockaddr_in` or `sockaddr_in6`),
/// or `None` for another provider's format.
pub(crate) fn socket_address(name: &[u8]) -> Option<SocketAddr> {
    let family = i32::from(u16::from_ne_bytes([*name.first()?, *name.get(1)?]));
    let port = u16::from_be_bytes([*name.get(2)?, *name.get(3)?]);
    let ip = match family {
        libc::AF_INET => {
            let octets: [u8; 4] = name.get(4..8)?.try_into().ok()?;
            IpAddr::V4(Ipv4Addr::from(octets))
        }
        libc::AF_INET6 => {
            let octets: [u8; 16] = name.get(8..24)?.try_into().ok()?;
            IpAddr::V6(Ipv6Addr::from(octets))
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// Set close-on-exec on every descriptor of this process, past the standard streams, that is a
/// socket with a local or remote address among `addresses` and lacks it; how many were set.
pub(crate) fn close_on_exec(addresses: &[SocketAddr]) -> usize {
    if addresses.is_empty() {
        return 0;
    }
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return 0;
    };
    let fds = dir
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<RawFd>().ok())
        .filter(|&fd| fd > 2);
    let mut set = 0;
    for fd in fds {
        let Some(flags) = fd_flags(fd).filter(|f| f & libc::FD_CLOEXEC == 0) else {
            continue;
        };
        // A listening socket bound to every interface has the endpoint's port only.
        let local = local_address(fd).is_some_and(|l| {
            addresses
                .iter()
                .any(|a| *a == l || (l.ip().is_unspecified() && a.port() == l.port()))
        });
        let ours = local || peer_address(fd).is_some_and(|p| addresses.contains(&p));
        // SAFETY: F_SETFD sets the descriptor flags of `fd`, an integer; on a descriptor that
        // was closed and reused since the look above, it marks that one (a race with another
        // thread closing a socket of the provider's between two system calls).
        if ours && unsafe { libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC) } == 0 {
            set += 1;
        }
    }
    set
}

/// The descriptor flags of `fd`, `None` where it is not open.
fn fd_flags(fd: RawFd) -> Option<libc::c_int> {
    // SAFETY: F_GETFD reads the flags of a descriptor number; a closed one gives EBADF.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
    (flags >= 0).then_some(flags)
}

/// The local address of socket `fd`, `None` where it is not an internet socket.
fn local_address(fd: RawFd) -> Option<SocketAddr> {
    address_of(fd, libc::getsockname)
}

/// The remote address of socket `fd`, `None` where it is not a connected internet socket.
fn peer_address(fd: RawFd) -> Option<SocketAddr> {
    address_of(fd, libc::getpeername)
}

/// What `call` (`getsockname` or `getpeername`) gives for `fd`, as an internet address.
fn address_of(
    fd: RawFd,
    call: unsafe extern "C" fn(
        libc::c_int,
        *mut libc::sockaddr,
        *mut libc::socklen_t,
    ) -> libc::c_int,
) -> Option<SocketAddr> {
    // SAFETY: sockaddr_storage is a plain C struct for which all-zero bytes are a valid value.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: `storage` holds `len` bytes for the address; a descriptor that is not a socket
    // gives ENOTSOCK and writes nothing.
    if unsafe { call(fd, (&raw mut storage).cast(), &raw mut len) } != 0 {
        return None;
    }
    let len = (len as usize).min(size_of::<libc::sockaddr_storage>());
    // SAFETY: the call wrote `len` bytes of `storage`, which holds at least that many.
    let bytes = unsafe { std::slice::from_raw_parts((&raw const storage).cast::<u8>(), len) };
    socket_address(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsRawFd;

    /// The bytes of `struct sockaddr_in` for `a`, as the tcp provider names an endpoint.
    fn sockaddr_in(a: std::net::SocketAddrV4) -> Vec<u8> {
        let mut b = (libc::AF_INET as u16).to_ne_bytes().to_vec();
        b.extend(a.port().to_be_bytes());
        b.extend(a.ip().octets());
        b.extend([0u8; 8]);
        b
    }

    #[test]
    fn reads_the_tcp_providers_addresses_only() {
        let a = "127.0.0.1:4242".parse().unwrap();
        assert_eq!(socket_address(&sockaddr_in(a)), Some(SocketAddr::V4(a)));
        let mut v6 = (libc::AF_INET6 as u16).to_ne_bytes().to_vec();
        v6.extend(7u16.to_be_bytes());
        v6.extend([0u8; 4]);
        v6.extend(Ipv6Addr::LOCALHOST.octets());
        v6.extend([0u8; 4]);
        assert_eq!(socket_address(&v6), Some("[::1]:7".parse().unwrap()));
        assert_eq!(
            socket_address(b"fi_shm://1234"),
            None,
            "the shm provider's names"
        );
        assert_eq!(socket_address(&[2]), None, "too short");
    }

    /// Sockets opened without close-on-exec, as the provider opens them: those at the given
    /// addresses (a listener, the connection accepted from it, the one that connected to it)
    /// are marked, another pair is left as it was.
    #[test]
    fn marks_the_sockets_at_the_addresses_and_no_other() {
        let open = |fd: RawFd| {
            let flags = fd_flags(fd).unwrap();
            // SAFETY: clears the flag on a descriptor this test owns, as the provider's are.
            let ret = unsafe { libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC) };
            assert_eq!(ret, 0);
        };
        let marked = |fd: RawFd| fd_flags(fd).unwrap() & libc::FD_CLOEXEC != 0;
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let at = listener.local_addr().unwrap();
        let out = TcpStream::connect(at).unwrap();
        let (accepted, _) = listener.accept().unwrap();
        let other = TcpListener::bind("127.0.0.1:0").unwrap();
        let theirs = TcpStream::connect(other.local_addr().unwrap()).unwrap();
        let all = [
            &listener.as_raw_fd(),
            &out.as_raw_fd(),
            &accepted.as_raw_fd(),
        ];
        for fd in all
            .iter()
            .map(|f| **f)
            .chain([other.as_raw_fd(), theirs.as_raw_fd()])
        {
            open(fd);
        }
        assert_eq!(close_on_exec(&[at]), 3);
        assert!(all.iter().all(|fd| marked(**fd)), "the provider's sockets");
        assert!(
            !marked(other.as_raw_fd()) && !marked(theirs.as_raw_fd()),
            "the program's"
        );
        assert_eq!(close_on_exec(&[]), 0);
    }
}
